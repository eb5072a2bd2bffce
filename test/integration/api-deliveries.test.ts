import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, listAll, publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

describe('deliveries and messages API', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let receiver: Receiver;
  let flaky: Receiver;
  let epOk: string;
  let epOff: string;
  let epFlaky: string;
  const events: string[] = [];
  let boundary: Date;

  const ids = async (query: string) => (await listAll(tenant, `/v1/deliveries${query}`, 2)).items.map((d) => d.id as string).sort();
  // Deliveries hold their event and endpoint as the uuids their TypeIDs encode.
  const deliveryOf = async (eventId: string, endpointId: string) =>
    idOfUuid('delivery', (await t.platform.db('deliveries').where({ event_id: uuidOf('event', eventId), endpoint_id: uuidOf('endpoint', endpointId) }).first('id')).id);

  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver();
    // Fails the first try so the delivery shows a retry in its attempts.
    flaky = await startReceiver((_req, res, index) => {
      res.writeHead(index === 0 ? 503 : 200, { 'content-type': 'text/plain' }).end(index === 0 ? 'busy' : 'ok');
    });
    tenant = await t.createTenant('deliveries');
    epOk = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/ok`, eventTypes: ['order.*'] } })).body.id;
    epOff = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/off`, eventTypes: ['order.*'] } })).body.id;
    epFlaky = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${flaky.url}/flaky`, eventTypes: ['flaky.*'] } })).body.id;
    expect((await tenant.call('PATCH', `/v1/endpoints/${epOff}`, { body: { status: 'disabled' } })).status).toBe(200);

    events.push(await publish(tenant, { type: 'order.created', messageId: 'msg-A', data: { n: 1 } }));
    events.push(await publish(tenant, { type: 'order.paid', messageId: 'msg-A', data: { n: 2 } }));
    const last = new Date((await tenant.call('GET', `/v1/events/${events[1]}`)).body.createdAt).getTime();
    boundary = new Date(last + 1);
    while (Date.now() < boundary.getTime() + 1) await new Promise((r) => setImmediate(r));
    events.push(await publish(tenant, { type: 'order.created', messageId: 'msg-B', data: { n: 3 } }));
    events.push(await publish(tenant, { type: 'flaky.thing', data: { n: 4 } }));

    // Deliveries hold the tenant as the uuid its TypeID encodes.
    const tenantKey = uuidOf('tenant', tenant.id);
    await eventually(async () => {
      const { n } = (await t.platform.db('deliveries').where({ tenant_id: tenantKey }).whereNot({ status: 'succeeded' }).whereNot({ status: 'dead' }).count({ n: '*' }))[0]!;
      return Number(n) === 0;
    }, 'every delivery settled');
  });
  afterAll(async () => {
    await receiver?.close();
    await flaky?.close();
    await t?.stop();
  });

  it('filters by status, endpoint, event, dead-letter reason and time range', async () => {
    const [e1, e2, e3, e4] = events as [string, string, string, string];
    const ok = await Promise.all([e1, e2, e3].map((e) => deliveryOf(e, epOk)));
    const off = await Promise.all([e1, e2, e3].map((e) => deliveryOf(e, epOff)));
    const fl = await deliveryOf(e4, epFlaky);

    const { items, pages } = await listAll(tenant, '/v1/deliveries', 2);
    expect(pages).toBe(4);
    expect(items).toHaveLength(7);
    expect(new Set(items.map((d) => d.id)).size).toBe(7);
    expect(items.map((d) => d.id)).toEqual([...items.map((d) => d.id)].sort().reverse()); // newest first

    expect(await ids('?status=succeeded')).toEqual([...ok, fl].sort());
    expect(await ids('?status=dead')).toEqual([...off].sort());
    expect(await ids('?status=pending')).toEqual([]);
    expect(await ids(`?endpointId=${epOff}`)).toEqual([...off].sort());
    expect(await ids(`?endpointId=${epOff}&status=succeeded`)).toEqual([]);
    expect(await ids(`?eventId=${e2}`)).toEqual([ok[1], off[1]].sort());
    expect(await ids('?reason=endpoint_disabled')).toEqual([...off].sort());
    expect(await ids('?eventType=flaky.thing')).toEqual([fl]);
    expect(await ids(`?since=${boundary.toISOString()}`)).toEqual([ok[2], off[2], fl].sort());
    expect(await ids(`?until=${boundary.toISOString()}`)).toEqual([ok[0], ok[1], off[0], off[1]].sort());
    expect(await ids(`?since=${boundary.toISOString()}&endpointId=${epOk}`)).toEqual([ok[2]]);

    expectError(await tenant.call('GET', '/v1/deliveries?status=lost'), 400, 'validation_failed');
    expectError(await tenant.call('GET', '/v1/deliveries?until=not-a-date'), 400, 'validation_failed');
  });

  it('list items carry the delivery summary and the event they belong to', async () => {
    const res = await tenant.call('GET', `/v1/deliveries?eventId=${events[0]}&endpointId=${epOff}`);
    expect(res.body.data).toEqual([
      expect.objectContaining({
        id: expect.stringMatching(/^dlv_/),
        eventId: events[0],
        eventType: 'order.created',
        endpointId: epOff,
        status: 'dead',
        deadReason: 'endpoint_disabled',
        attemptCount: 0,
        nextAttemptAt: null,
      }),
    ]);
    expect(res.body.nextCursor).toBeNull();
  });

  it('GET /v1/deliveries/:id shows every attempt: time, status code, latency, error, trigger, next attempt', async () => {
    const id = await deliveryOf(events[3]!, epFlaky);
    const res = await tenant.call('GET', `/v1/deliveries/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id, eventId: events[3], endpointId: epFlaky, status: 'succeeded', attemptCount: 2, lastStatusCode: 200, succeededAt: expect.any(String) });
    const [first, second] = res.body.attempts;
    expect(res.body.attempts).toHaveLength(2);
    expect(first).toMatchObject({
      id: expect.stringMatching(/^att_/),
      attemptNumber: 1,
      trigger: 'initial',
      statusCode: 503,
      outcome: 'retry',
      startedAt: expect.any(String),
      durationMs: expect.any(Number),
      nextAttemptAt: expect.any(String),
    });
    expect(second).toMatchObject({ attemptNumber: 2, trigger: 'retry', statusCode: 200, outcome: 'success', error: null, nextAttemptAt: null });
    expect(new Date(second.startedAt).getTime()).toBeGreaterThanOrEqual(new Date(first.nextAttemptAt).getTime() - 5);
    expect(flaky.requests).toHaveLength(2);
    // Found through the delivery's tenant: attempts no longer store their own (a failure and a
    // success, each from its own recording function; migration 20261203000042).
    expect(await t.platform.db('attempts').where({ delivery_id: uuidOf('delivery', id) }).pluck('tenant_id')).toEqual([null, null]);

    const dead = await tenant.call('GET', `/v1/deliveries/${await deliveryOf(events[0]!, epOff)}`);
    expect(dead.body).toMatchObject({ status: 'dead', deadReason: 'endpoint_disabled', attempts: [] });
    expectError(await tenant.call('GET', '/v1/deliveries/dlv_01h455vb4pex5vsknk084sn02q'), 404, 'not_found');
  });

  it('answers an id that is no delivery TypeID as an unknown one: 404 on every route, 400 for a cursor', async () => {
    // Stored as the uuid a TypeID encodes, each of these would fail to convert: none may become a 500.
    const malformed = ['dlv_8zzzzzzzzzzzzzzzzzzzzzzzzz', 'dlv_01H455VB4PEX5VSKNK084SN02Q', 'dlv_nope', events[0]!, 'x'.repeat(100)];
    for (const id of malformed) {
      const answers = {
        get: await tenant.call('GET', `/v1/deliveries/${id}`),
        replay: await tenant.call('POST', `/v1/deliveries/${id}/replay`, { body: { reason: 'x' } }),
      };
      for (const [route, res] of Object.entries(answers)) expect({ id, route, status: res.status, code: res.body?.error?.code }).toEqual({ id, route, status: 404, code: 'not_found' });
    }
    // A page cursor carries the last id seen: another kind's is no delivery's.
    const foreign = Buffer.from(epOk).toString('base64url');
    expectError(await tenant.call('GET', `/v1/deliveries?cursor=${foreign}`), 400, 'invalid_cursor');
  });

  it('GET /v1/messages/:messageId shows every event about the message with its deliveries', async () => {
    const res = await tenant.call('GET', '/v1/messages/msg-A');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ messageId: 'msg-A', updatedAt: expect.any(String) });
    expect(res.body.events.map((e: { id: string }) => e.id)).toEqual([events[0], events[1]]);
    for (const event of res.body.events) {
      expect(event).toMatchObject({ messageId: 'msg-A', origin: 'api', receipts: { count: 0, times: [] } });
      expect(event.deliveries.map((d: { endpointId: string; status: string }) => [d.endpointId, d.status]).sort()).toEqual(
        [[epOk, 'succeeded'], [epOff, 'dead']].sort(),
      );
      const succeeded = event.deliveries.find((d: { endpointId: string }) => d.endpointId === epOk);
      expect(succeeded.attempts).toHaveLength(1);
    }
    const other = await tenant.call('GET', '/v1/messages/msg-B');
    expect(other.body.events.map((e: { id: string }) => e.id)).toEqual([events[2]]);
    expectError(await tenant.call('GET', '/v1/messages/no-such-message'), 404, 'not_found');
  });
});
