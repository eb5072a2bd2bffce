import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { listAll } from '../helpers/api.js';
import { createEndpoint, publish, type Delivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer, bulkReplay, completed, settledOn } from '../helpers/replay.js';
import { sentBody } from '../helpers/database.js';

/**
 * The "customer was down for a day" workflow: the tenant disables the endpoint, what arrives piles
 * up as dead `endpoint_disabled` deliveries, the tenant finds them with the dead-letter filters,
 * re-enables the endpoint and replays the pile, which arrives with the original webhook-ids.
 */
describe('dead-letter workflow', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let down: Receiver;
  let other: Receiver;
  let ep: string;
  let otherEp: string;
  const created: string[] = [];
  const paid: string[] = [];
  let boundary: Date;

  const dead = async (query: string) => (await listAll<Delivery & { eventType: string }>(tenant, `/v1/deliveries?${query}`, 3)).items;
  const eventIdsOf = (items: Delivery[]) => items.map((d) => d.eventId).sort();

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('was-down');
    down = await startReceiver();
    other = await startReceiver();
    ep = (await createEndpoint(tenant, { url: `${down.url}/down`, eventTypes: ['order.*'] })).id;
    // A healthy endpoint receiving the same events: its deliveries must stay out of every dead-letter view.
    otherEp = (await createEndpoint(tenant, { url: `${other.url}/other`, eventTypes: ['order.*'] })).id;
    expect((await tenant.call('PATCH', `/v1/endpoints/${ep}`, { body: { status: 'disabled' } })).body).toMatchObject({
      status: 'disabled',
      disabledReason: expect.any(String),
    });

    for (let i = 0; i < 6; i++) created.push(await publish(tenant, 'order.created', { i }));
    // Rows hold the event as the uuid its TypeID encodes.
    const last = await t.platform.db('events').where({ id: uuidOf('event', created.at(-1)!) }).first('created_at');
    boundary = new Date(last.created_at.getTime() + 1);
    while (Date.now() <= boundary.getTime() + 1) await new Promise((r) => setTimeout(r, 2));
    for (let i = 0; i < 4; i++) paid.push(await publish(tenant, 'order.paid', { i }));
    await settledOn(t, otherEp, 10);
  });
  afterAll(async () => {
    await down.close();
    await other.close();
    await t.stop();
  });

  it('keeps every event that arrived while the endpoint was disabled as a dead endpoint_disabled delivery', async () => {
    const items = await dead(`status=dead&reason=endpoint_disabled&endpointId=${ep}`);
    expect(eventIdsOf(items)).toEqual([...created, ...paid].sort());
    for (const d of items) expect(d).toMatchObject({ endpointId: ep, status: 'dead', deadReason: 'endpoint_disabled', attemptCount: 0 });
    expect(down.requests).toHaveLength(0);
    expect(other.requests).toHaveLength(10);
    // The healthy endpoint's deliveries are no dead letters.
    expect(await dead(`status=dead&endpointId=${otherEp}`)).toEqual([]);
    expect(eventIdsOf(await dead('status=dead'))).toEqual([...created, ...paid].sort());
  });

  it('narrows the dead letters by event type and time range', async () => {
    const base = `status=dead&reason=endpoint_disabled&endpointId=${ep}`;
    expect(eventIdsOf(await dead(`${base}&eventType=order.paid`))).toEqual([...paid].sort());
    expect(eventIdsOf(await dead(`${base}&eventType=order.created`))).toEqual([...created].sort());
    expect(eventIdsOf(await dead(`${base}&since=${boundary.toISOString()}`))).toEqual([...paid].sort());
    expect(eventIdsOf(await dead(`${base}&until=${boundary.toISOString()}`))).toEqual([...created].sort());
    expect(eventIdsOf(await dead(`${base}&eventType=order.paid&until=${boundary.toISOString()}`))).toEqual([]);
    expect(await dead(`status=dead&reason=terminal&endpointId=${ep}`)).toEqual([]);
  });

  it('after re-enabling, a bulk replay delivers the whole pile with the original webhook-ids and body bytes', async () => {
    expect((await tenant.call('PATCH', `/v1/endpoints/${ep}`, { body: { status: 'active' } })).body).toMatchObject({ status: 'active', disabledReason: null });
    const filter = { endpointId: ep, reason: 'endpoint_disabled' };
    const preview = await bulkReplay(tenant, { filter, dryRun: true });
    expect(preview.body.count).toBe(10);

    const res = await bulkReplay(tenant, { filter, reason: 'customer back online after the outage' });
    expect(res.status, res.text).toBe(202);
    expect(res.body.count).toBe(10);

    await eventually(async () => down.requests.length >= 10, 'the ten piled-up events at the receiver');
    expect(down.eventIds()).toEqual(new Set([...created, ...paid]));
    // Rows hold the events as uuids; the webhook-id header names them by their TypeIDs.
    const bodies = new Map<string, string>(
      (await t.platform.db('events').whereIn('id', [...created, ...paid].map((id) => uuidOf('event', id))).select('id', sentBody(t.platform.db))).map(
        (e: { id: string; body: string }) => [idOfUuid('event', e.id), e.body],
      ),
    );
    for (const req of down.requests) {
      expect(req.body).toBe(bodies.get(String(req.headers['webhook-id'])));
      expect(req.headers['webhook-replay']).toBe('true');
    }
    expect(await completed(tenant, res.body.id)).toMatchObject({ total: 10, done: 10, failed: 0 });
    expect(await dead(`status=dead&endpointId=${ep}`)).toEqual([]);
    expect(eventIdsOf(await dead(`status=succeeded&endpointId=${ep}`))).toEqual([...created, ...paid].sort());
    // Replay reused the deliveries: still one per (event, endpoint), and the healthy endpoint got nothing twice.
    expect(Number((await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep) }).count({ n: '*' }))[0]!.n)).toBe(10);
    expect(other.requests).toHaveLength(10);
    expect(down.requests).toHaveLength(10);
  });

  it('also dead-letters deliveries that were waiting for a retry when the endpoint was disabled, and replays them', async () => {
    const failing = await startReceiver(answer(503));
    try {
      // A long retry delay keeps the three deliveries pending until the tenant gives up and disables.
      const id = (await createEndpoint(tenant, { url: `${failing.url}/retrying`, eventTypes: ['invoice.*'], retryPolicy: { baseDelayMs: 60_000, maxDelayMs: 60_000 } })).id;
      const events = [await publish(tenant, 'invoice.created'), await publish(tenant, 'invoice.created'), await publish(tenant, 'invoice.created')];
      // Pending after a first attempt each: pending alone is also where they start, and a delivery
      // disabled before its first attempt would leave the receiver one request short below.
      await eventually(
        async () => (await dead(`status=pending&endpointId=${id}`)).filter((d) => d.attemptCount === 1).length === 3,
        'three deliveries waiting for a retry',
      );
      await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { status: 'disabled' } });
      const piled = await eventually(async () => {
        const items = await dead(`status=dead&reason=endpoint_disabled&endpointId=${id}`);
        return items.length === 3 && items;
      }, 'the sweeper dead-letters the waiting deliveries');
      expect(eventIdsOf(piled)).toEqual([...events].sort());

      await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { status: 'active' } });
      failing.setResponder(answer(204));
      const res = await bulkReplay(tenant, { filter: { endpointId: id, reason: 'endpoint_disabled' } });
      expect(res.body.count).toBe(3);
      expect(await completed(tenant, res.body.id)).toMatchObject({ total: 3, done: 3, failed: 0 });
      expect(new Set(failing.requests.slice(3).map((r) => r.headers['webhook-id']))).toEqual(new Set(events));
    } finally {
      await failing.close();
    }
  });
});
