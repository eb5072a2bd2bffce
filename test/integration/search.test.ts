import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { expectError, listAll, publish } from '../helpers/api.js';
import type { ApiResponse } from '../helpers/http.js';
import { createSource, postCallback, sign } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer } from '../helpers/replay.js';

/**
 * Finding things: event and delivery search, cursor pagination on every list route, and the
 * message timeline that answers "where did my event go" from one message id.
 *
 *   before `boundary`: API events order.created/order.paid (message o-1), invoice.paid; SMS sms-1 callbacks
 *   after it:          order.created (message o-2), invoice.paid
 *
 * Endpoints: ok (order.*, message.*) answers 200; retrying (message.*) answers 503 with a one-minute
 * retry delay, so its deliveries wait; off (invoice.*) is disabled, so its deliveries are dead.
 */
describe('search and troubleshooting', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let okR: Receiver;
  let retryR: Receiver;
  const ep = { ok: '', retrying: '', off: '' };
  const ev = { created1: '', paid1: '', invoice1: '', created2: '', invoice2: '' };
  let sms: { accepted: string; sent: string; delivered: string };
  let boundary: Date;

  const eventIds = async (query: string) => (await listAll(tenant, `/v1/events${query}`, 2)).items.map((e) => e.id as string).sort();
  const deliveryEvents = async (query: string) => (await listAll(tenant, `/v1/deliveries${query}`, 2)).items.map((d) => `${d.eventId}@${d.endpointId}`).sort();
  const pairs = (events: string[], endpoint: string) => events.map((e) => `${e}@${endpoint}`);
  const createEp = async (url: string, body: Record<string, unknown>) => {
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url, ...body } });
    expect(res.status, res.text).toBe(201);
    return res.body.id as string;
  };

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('searcher');
    okR = await startReceiver();
    retryR = await startReceiver(answer(503));
    ep.ok = await createEp(`${okR.url}/ok`, { eventTypes: ['order.*', 'message.*'] });
    ep.retrying = await createEp(`${retryR.url}/retry`, { eventTypes: ['message.*'], retryPolicy: { baseDelayMs: 60_000, maxDelayMs: 60_000 } });
    ep.off = await createEp(`${okR.url}/off`, { eventTypes: ['invoice.*'] });
    await tenant.call('PATCH', `/v1/endpoints/${ep.off}`, { body: { status: 'disabled' } });

    ev.created1 = await publish(tenant, { type: 'order.created', messageId: 'o-1' });
    ev.paid1 = await publish(tenant, { type: 'order.paid', messageId: 'o-1' });
    ev.invoice1 = await publish(tenant, { type: 'invoice.paid' });

    // An SMS whose status moves accepted -> sent -> delivered; the provider sends "sent" three times
    // (twice byte-identical, once with a new timestamp): one event, three receipts.
    const source = await createSource(tenant, 'momo-communication');
    const callback = async (body: string) => {
      const res = await postCallback(t, source.id, sign.communication(source.secret, body));
      expect(res.status, res.text).toBe(200);
      return res.body.eventId as string;
    };
    const accepted = await callback(communication.messageStatus('sms-1', 'accepted', '2026-11-29T10:00:00Z'));
    const sentBody = communication.messageStatus('sms-1', 'sent', '2026-11-29T10:00:01Z');
    const sent = await callback(sentBody);
    expect(await callback(sentBody)).toBe(sent);
    expect(await callback(communication.messageStatus('sms-1', 'sent', '2026-11-29T10:00:02Z'))).toBe(sent);
    const delivered = await callback(communication.messageStatus('sms-1', 'delivered', '2026-11-29T10:00:03Z'));
    sms = { accepted, sent, delivered };

    // Rows hold the event as the uuid its TypeID encodes.
    const last = await t.platform.db('events').where({ id: uuidOf('event', delivered) }).first('created_at');
    boundary = new Date(last.created_at.getTime() + 1);
    while (Date.now() <= boundary.getTime() + 1) await new Promise((r) => setTimeout(r, 2));
    ev.created2 = await publish(tenant, { type: 'order.created', messageId: 'o-2' });
    ev.invoice2 = await publish(tenant, { type: 'invoice.paid' });

    // Settled: ok has everything, retrying has tried each SMS event once and waits.
    await eventually(async () => {
      const rows = (await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', tenant.id) }) as Array<{ endpoint_id: string; status: string; attempt_count: number }>)
        .map((r) => ({ ...r, endpoint_id: idOfUuid('endpoint', r.endpoint_id) }));
      return (
        rows.filter((r) => r.endpoint_id === ep.ok && r.status === 'succeeded').length === 6 &&
        rows.filter((r) => r.endpoint_id === ep.retrying && r.status === 'pending' && r.attempt_count === 1).length === 3
      );
    }, 'deliveries settled', 15_000);
  });
  afterAll(async () => {
    await okR.close();
    await retryR.close();
    await t.stop();
  });

  it('finds events by type, message id and time range, alone and combined', async () => {
    const smsEvents = [sms.accepted, sms.sent, sms.delivered];
    const cases: Array<[string, string[]]> = [
      ['?type=order.created', [ev.created1, ev.created2]],
      ['?type=message.status', smsEvents],
      ['?messageId=o-1', [ev.created1, ev.paid1]],
      ['?messageId=sms-1', smsEvents],
      ['?messageId=o-1&type=order.paid', [ev.paid1]],
      [`?since=${boundary.toISOString()}`, [ev.created2, ev.invoice2]],
      [`?until=${boundary.toISOString()}`, [ev.created1, ev.paid1, ev.invoice1, ...smsEvents]],
      [`?until=${boundary.toISOString()}&type=invoice.paid`, [ev.invoice1]],
      [`?since=${boundary.toISOString()}&messageId=o-1`, []],
      // A type ending in .* is a prefix, as in endpoint subscriptions.
      ['?type=order.*', [ev.created1, ev.paid1, ev.created2]],
      ['?type=invoice.*', [ev.invoice1, ev.invoice2]],
      ['?type=message.*', smsEvents],
      ['?type=order.*&messageId=o-1', [ev.created1, ev.paid1]],
      [`?type=order.*&since=${boundary.toISOString()}`, [ev.created2]],
      ['?type=order', []],
      ['?type=orde.*', []],
    ];
    for (const [query, expected] of cases) expect({ query, ids: await eventIds(query) }).toEqual({ query, ids: [...expected].sort() });
    expect((await tenant.call('GET', `/v1/events/${sms.sent}`)).body).toMatchObject({ id: sms.sent, origin: 'callback', messageId: 'sms-1', receiptCount: 3 });
  });

  it('finds deliveries by status, endpoint, event, event type, dead-letter reason and time range', async () => {
    const smsEvents = [sms.accepted, sms.sent, sms.delivered];
    const cases: Array<[string, string[]]> = [
      ['?status=pending', pairs(smsEvents, ep.retrying)],
      ['?status=dead', pairs([ev.invoice1, ev.invoice2], ep.off)],
      ['?status=dead&reason=endpoint_disabled', pairs([ev.invoice1, ev.invoice2], ep.off)],
      ['?status=dead&reason=terminal', []],
      [`?endpointId=${ep.ok}&eventType=order.created`, pairs([ev.created1, ev.created2], ep.ok)],
      [`?eventId=${sms.sent}`, [...pairs([sms.sent], ep.ok), ...pairs([sms.sent], ep.retrying)]],
      ['?eventType=message.status&status=succeeded', pairs(smsEvents, ep.ok)],
      [`?since=${boundary.toISOString()}`, [...pairs([ev.created2], ep.ok), ...pairs([ev.invoice2], ep.off)]],
      [`?until=${boundary.toISOString()}&status=succeeded`, pairs([ev.created1, ev.paid1, ...smsEvents], ep.ok)],
      [`?since=${boundary.toISOString()}&endpointId=${ep.retrying}`, []],
      ['?eventType=order.*', pairs([ev.created1, ev.paid1, ev.created2], ep.ok)],
      ['?eventType=message.*&status=pending', pairs(smsEvents, ep.retrying)],
    ];
    for (const [query, expected] of cases) expect({ query, found: await deliveryEvents(query) }).toEqual({ query, found: [...expected].sort() });
    expectError(await tenant.call('GET', '/v1/deliveries?reason=bored'), 400, 'validation_failed');
  });

  it('a type prefix matches _ and % literally, not as LIKE wildcards', async () => {
    const literal = await publish(tenant, { type: 'a_b.created' });
    await publish(tenant, { type: 'axb.created' });
    expect(await eventIds('?type=a_b.*')).toEqual([literal]);
    // As a LIKE pattern, '%.' would match every type with a dot in it.
    expect(await eventIds(`?type=${encodeURIComponent('%.*')}`)).toEqual([]);
  });

  it('pages every list route with limit and cursor: newest first, every row exactly once', async () => {
    // More endpoints and sources so every list has several pages.
    for (let i = 0; i < 3; i++) await createEp(`${okR.url}/extra-${i}`, { eventTypes: ['nothing.here'] });
    for (let i = 0; i < 3; i++) await createSource(tenant, 'standard-webhooks');
    const db = t.platform.db;
    // The tables hold the uuid the tenant's TypeID encodes, and events by the uuids of theirs.
    const tenantKey = uuidOf('tenant', tenant.id);
    const expected: Record<string, () => Promise<string[]>> = {
      '/v1/events': async () => (await db('events').where({ tenant_id: tenantKey }).orderBy('id', 'desc').pluck('id')).map((id: string) => idOfUuid('event', id)),
      '/v1/deliveries': async () => (await db('deliveries').where({ tenant_id: tenantKey }).orderBy('id', 'desc').pluck('id')).map((id: string) => idOfUuid('delivery', id)),
      '/v1/endpoints': async () => (await db('endpoints').where({ tenant_id: tenantKey }).whereNull('deleted_at').orderBy('id', 'desc').pluck('id')).map((id: string) => idOfUuid('endpoint', id)),
      '/v1/sources': () => db('sources').where({ tenant_id: tenantKey }).orderBy('id', 'desc').pluck('id'),
      '/v1/audit-log': () => db('audit_log').where({ tenant_id: tenantKey }).orderBy('id', 'desc').pluck('id'),
    };
    for (const [path, rows] of Object.entries(expected)) {
      const all = await rows();
      expect(all.length, path).toBeGreaterThan(3);
      for (const size of [1, 3]) {
        const { items, pages } = await listAll(tenant, path, size);
        expect({ path, size, ids: items.map((x) => x.id) }).toEqual({ path, size, ids: all });
        expect(pages).toBe(Math.ceil(all.length / size));
      }
      expectError(await tenant.call('GET', `${path}?cursor=%%%`), 400, 'invalid_cursor');
    }
  });

  it('keeps a page walk consistent while new rows arrive: nothing repeated, nothing older skipped', async () => {
    const before = (await listAll(tenant, '/v1/events', 500)).items.map((e) => e.id as string);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: ApiResponse = await tenant.call('GET', `/v1/events?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      seen.push(...res.body.data.map((e: { id: string }) => e.id));
      cursor = res.body.nextCursor;
      // Newer events land before the cursor, so they must not disturb the rest of the walk.
      await publish(tenant, { type: 'order.created', messageId: 'during-walk' });
    } while (cursor);
    expect(seen).toEqual(before);
  });

  it('GET /v1/messages/:messageId shows the current status, every event with its receipts, every delivery with attempts and next attempt', async () => {
    const res = await tenant.call('GET', '/v1/messages/sms-1');
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ messageId: 'sms-1', status: 'delivered', final: true, updatedAt: expect.any(String) });
    expect(res.body.events.map((e: { id: string; status: string }) => [e.id, e.status])).toEqual([
      [sms.accepted, 'accepted'],
      [sms.sent, 'sent'],
      [sms.delivered, 'delivered'],
    ]);
    const counts = res.body.events.map((e: { receipts: { count: number } }) => e.receipts.count);
    expect(counts).toEqual([1, 3, 1]);
    const sent = res.body.events[1];
    expect(sent.receipts.times).toHaveLength(3);
    expect([...sent.receipts.times].sort()).toEqual(sent.receipts.times);
    expect(sent.receipts).toMatchObject({ first: sent.receipts.times[0], last: sent.receipts.times[2] });
    expect(sent.payload).toMatchObject({ id: sms.sent, type: 'message.status', messageId: 'sms-1' });

    for (const event of res.body.events) {
      const byEndpoint = Object.fromEntries(event.deliveries.map((d: { endpointId: string }) => [d.endpointId, d]));
      expect(Object.keys(byEndpoint).sort()).toEqual([ep.ok, ep.retrying].sort());
      expect(byEndpoint[ep.ok]).toMatchObject({ status: 'succeeded', nextAttemptAt: null, attempts: [expect.objectContaining({ trigger: 'initial', statusCode: 200, outcome: 'success' })] });
      const waiting = byEndpoint[ep.retrying];
      expect(waiting).toMatchObject({ status: 'pending', attemptCount: 1, lastStatusCode: 503 });
      expect(waiting.attempts).toEqual([expect.objectContaining({ trigger: 'initial', statusCode: 503, outcome: 'retry', nextAttemptAt: waiting.nextAttemptAt })]);
      // A one-minute base delay with equal jitter: the next try is 30 to 60 s after the first.
      const wait = new Date(waiting.nextAttemptAt).getTime() - new Date(waiting.attempts[0].startedAt).getTime();
      expect(wait).toBeGreaterThanOrEqual(29_000);
      expect(wait).toBeLessThanOrEqual(61_000);
    }

    const apiMessage = await tenant.call('GET', '/v1/messages/o-1');
    expect(apiMessage.body.events.map((e: { id: string }) => e.id)).toEqual([ev.created1, ev.paid1]);
    expect(apiMessage.body.events.every((e: { receipts: { count: number } }) => e.receipts.count === 0)).toBe(true);
    expectError(await tenant.call('GET', '/v1/messages/never-heard-of-it'), 404, 'not_found');
  });
});
