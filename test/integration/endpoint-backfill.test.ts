import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { eventDaysLock } from '../../src/store/retention-store.js';
import { advisoryLockWaiters } from '../helpers/database.js';
import { expectError } from '../helpers/api.js';
import { createEndpoint, publish, publishMany } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { createSource, expectOutcome, postCallback, sign } from '../helpers/intake.js';
import { communication } from '../helpers/providers.js';
import { completed } from '../helpers/replay.js';

/**
 * POST /v1/endpoints/:id/backfill through the real API, PostgreSQL and loopback receivers.
 *
 * Before endpoint N (order.*, invoice.*) exists, the tenant publishes o1 o2 (order.created),
 * i1 (invoice.paid), p1 (order.paid) and s1 (shipment.sent, which N does not take); endpoint E
 * (order.*) already existed and got the order events. After N exists, o3 reaches N by fan-out.
 */
describe('endpoint backfill', () => {
  let t: TestPlatform;
  let a: TestTenant;
  let b: TestTenant;
  let re: Receiver;
  let rn: Receiver;
  let epE: string;
  let epN: string;
  let since: string;
  const ev: Record<string, string> = {};
  /** REPLAY_MAX_LIMIT: the most events one backfill may take. */
  const cap = 4;

  const backfill = (tenant: TestTenant, endpointId: string, body: Record<string, unknown>) =>
    tenant.call('POST', `/v1/endpoints/${endpointId}/backfill`, { body: { since, reason: 'new endpoint needs history', ...body } });
  // Deliveries hold their event as the uuid its TypeID encodes; the test names events by TypeID.
  const deliveriesTo = async (endpointId: string) =>
    (await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', endpointId) }).orderBy('id').select('event_id', 'replay_id', 'status')).map(
      (d: { event_id: string; replay_id: string | null; status: string }) => ({ ...d, event_id: idOfUuid('event', d.event_id) }),
    );
  /** How many requests each webhook-id reached the receiver with. */
  const receivedTimes = (rx: Receiver) => {
    const times = new Map<string, number>();
    for (const r of rx.requests) times.set(String(r.headers['webhook-id']), (times.get(String(r.headers['webhook-id'])) ?? 0) + 1);
    return times;
  };

  beforeAll(async () => {
    t = await startTestPlatform({ env: { REPLAY_RATE_PER_SECOND: '200', REPLAY_MAX_LIMIT: String(cap) } });
    a = await t.createTenant('backfill');
    b = await t.createTenant('other');
    re = await startReceiver();
    rn = await startReceiver();
    since = new Date(Date.now() - 60_000).toISOString();
    epE = (await createEndpoint(a, { url: `${re.url}/e`, eventTypes: ['order.*'] })).id;
    ev.o1 = await publish(a, 'order.created');
    ev.o2 = await publish(a, 'order.created');
    ev.i1 = await publish(a, 'invoice.paid');
    ev.p1 = await publish(a, 'order.paid');
    ev.s1 = await publish(a, 'shipment.sent');
    await eventually(async () => re.eventIds().size === 3, 'the order events at the existing endpoint');
    epN = (await createEndpoint(a, { url: `${rn.url}/n`, eventTypes: ['order.*', 'invoice.*'] })).id;
    ev.o3 = await publish(a, 'order.created');
    await eventually(async () => rn.eventIds().has(ev.o3!), 'the event published after the endpoint existed');
  });
  afterAll(async () => {
    await re.close();
    await rn.close();
    await t.stop();
  });

  it('lists every problem of a request in one 400', async () => {
    const missing = await a.call('POST', `/v1/endpoints/${epN}/backfill`, { body: { eventTypes: ['bad type'] } });
    expectError(missing, 400, 'validation_failed');
    expect(missing.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(['eventTypes.0', 'reason', 'since']);

    const window = await backfill(a, epN, { since: new Date(Date.now() - 31 * 86_400_000).toISOString(), until: new Date(Date.now() - 40 * 86_400_000).toISOString() });
    expectError(window, 400, 'validation_failed');
    expect(window.body.error.details).toEqual([
      { path: 'since', message: expect.stringContaining('RETENTION_DAYS (30 days)') },
      { path: 'since', message: 'must not be after until' },
    ]);
  });

  it("bounds since by PostgreSQL's clock, where retention removes, whatever the process's clock says", async () => {
    const dayMs = 86_400_000;
    const { rows } = await t.platform.db.raw<{ rows: Array<{ now: Date }> }>('SELECT now() AS now');
    const databaseNow = rows[0]!.now.getTime();
    // The api runs in this process (startTestPlatform), so faking Date here skews its clock.
    const askWithClock = async (skewMs: number, sinceMs: number) => {
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + skewMs, shouldAdvanceTime: true });
      try {
        return await backfill(a, epN, { since: new Date(sinceMs).toISOString(), dryRun: true });
      } finally {
        vi.useRealTimers();
      }
    };
    // An hour past RETENTION_DAYS (30) by PostgreSQL's clock: retention may be removing that day,
    // though a process clock a day behind would put it inside.
    const outside = await askWithClock(-dayMs, databaseNow - 30 * dayMs - 3_600_000);
    expectError(outside, 400, 'validation_failed');
    expect(outside.body.error.details).toEqual([{ path: 'since', message: expect.stringContaining('RETENTION_DAYS (30 days)') }]);
    // An hour inside it: taken, though a process clock a day ahead would put it outside.
    const inside = await askWithClock(dayMs, databaseNow - 30 * dayMs + 3_600_000);
    expect(inside.status).toBe(200);
    // Without until, the window ends at PostgreSQL's now too: with the process's clock a day
    // behind, it would end before it began and take nothing.
    const lastHour = databaseNow - 3_600_000;
    const unskewed = await askWithClock(0, lastHour);
    expect(unskewed.body.total).toBeGreaterThan(0);
    expect((await askWithClock(-dayMs, lastHour)).body.total).toBe(unskewed.body.total);
  });

  it("takes only the events the endpoint's content filter takes, as fan-out would", async () => {
    const amounts = [50, 100, 250];
    const ids = [];
    for (const amount of amounts) ids.push(await publish(b, 'pay.made', { amount }));
    const rf = await startReceiver();
    try {
      const created = await b.call('POST', '/v1/endpoints', { body: { url: `${rf.url}/f`, eventTypes: ['pay.*'], filter: { 'data.amount': { $gte: 100 } } } });
      expect(created.status, created.text).toBe(201);
      const preview = await backfill(b, created.body.id, { dryRun: true });
      expect(preview.status).toBe(200);
      expect(preview.body.total).toBe(2);
      const started = await backfill(b, created.body.id, {});
      expect(started.status).toBe(202);
      await eventually(async () => rf.eventIds().size === 2, 'the two events the filter takes');
      expect([...rf.eventIds()].sort()).toEqual([ids[1], ids[2]].sort());
    } finally {
      await rf.close();
    }
  });

  it("answers 404 for an unknown endpoint and another tenant's", async () => {
    expectError(await backfill(b, epN, {}), 404, 'not_found');
    expectError(await backfill(a, 'ep_nope', { dryRun: true }), 404, 'not_found');
  });

  it('a dry run counts and samples the events that lack a delivery and creates nothing', async () => {
    const before = await deliveriesTo(epN);
    const dry = await backfill(a, epN, { dryRun: true });
    expect(dry.status, dry.text).toBe(200);
    // o3 has its delivery already; s1 is a type the endpoint does not take.
    expect(dry.body.total).toBe(4);
    expect(dry.body.sample.map((e: { id: string }) => e.id)).toEqual([ev.o1, ev.o2, ev.i1, ev.p1]);

    const narrowed = await backfill(a, epN, { dryRun: true, eventTypes: ['invoice.*', 'shipment.sent'] });
    expect(narrowed.body).toMatchObject({ total: 1, sample: [{ id: ev.i1, type: 'invoice.paid' }] });

    expect(await deliveriesTo(epN)).toEqual(before);
    expect(await t.platform.db('replays').where({ tenant_id: uuidOf('tenant', a.id) })).toEqual([]);
  });

  it('eventTypes narrows what is delivered', async () => {
    const res = await backfill(a, epN, { eventTypes: ['invoice.paid'] });
    expect(res.status, res.text).toBe(202);
    expect(res.body.total).toBe(1);
    const done = await completed(a, res.body.id);
    expect(done).toMatchObject({ kind: 'backfill', total: 1, done: 1, failed: 0 });
    expect(rn.eventIds().has(ev.i1!)).toBe(true);
    expect(rn.eventIds().has(ev.o1!)).toBe(false);
  });

  it('delivers each past event exactly once, and running it again creates nothing', async () => {
    const res = await backfill(a, epN, {});
    expect(res.status, res.text).toBe(202);
    expect(res.body.total).toBe(3);
    expect(await completed(a, res.body.id)).toMatchObject({ status: 'completed', total: 3, done: 3, failed: 0 });

    const again = await backfill(a, epN, { reason: 'once more' });
    expect(again.status, again.text).toBe(202);
    expect(again.body.total).toBe(0);
    expect(await completed(a, again.body.id)).toMatchObject({ total: 0, done: 0 });

    // Every event the endpoint takes, once each: o3 by fan-out, i1 by the first backfill, the rest by this one.
    const times = receivedTimes(rn);
    expect([...times.keys()].sort()).toEqual([ev.o1, ev.o2, ev.o3, ev.i1, ev.p1].sort());
    expect([...times.values()].every((n) => n === 1)).toBe(true);
    // The existing endpoint got nothing from it: its events had deliveries already.
    expect((await deliveriesTo(epE)).filter((r) => r.replay_id !== null)).toEqual([]);
    const rows = await deliveriesTo(epN);
    expect(rows).toHaveLength(5);
    expect(new Set(rows.map((r) => r.event_id)).size).toBe(5);
  });

  it('two backfills of one endpoint at once create each delivery once', async () => {
    const rx = await startReceiver();
    try {
      const ep = (await createEndpoint(a, { url: `${rx.url}/c`, eventTypes: ['order.*'] })).id;
      const runs = await Promise.all([backfill(a, ep, {}), backfill(a, ep, {}), backfill(a, ep, {})]);
      for (const r of runs) expect(r.status, r.text).toBe(202);
      // o1 o2 p1 o3: one backfill took all four, the others found nothing left.
      expect(runs.map((r) => r.body.total as number).sort()).toEqual([0, 0, 4]);
      for (const r of runs) await completed(a, r.body.id);
      const rows = await deliveriesTo(ep);
      expect(rows.map((r) => r.event_id).sort()).toEqual([ev.o1, ev.o2, ev.p1, ev.o3].sort());
      expect(rows.every((r) => r.status === 'succeeded')).toBe(true);
      expect(rx.requests).toHaveLength(4);
      expect(rx.eventIds().size).toBe(4);
    } finally {
      await rx.close();
    }
  });

  it('is audited with its reason and count', async () => {
    const res = await a.call('GET', '/v1/audit-log?action=endpoint.backfilled&limit=100');
    expect(res.status, res.text).toBe(200);
    const mine = res.body.data.filter((e: { target: { id: string } }) => e.target.id === epN);
    expect(mine).toHaveLength(3);
    expect(mine.map((e: { reason: string }) => e.reason).sort()).toEqual(['new endpoint needs history', 'new endpoint needs history', 'once more']);
    expect(mine.map((e: { details: { count: number } }) => e.details.count).sort()).toEqual([0, 1, 3]);
  });

  it('leaves out stale events: fan-out forwarded them to nobody', async () => {
    const c = await t.createTenant('stale');
    const source = await createSource(c, 'momo-communication');
    const messageId = `m-${Date.now()}`;
    const delivered = expectOutcome(await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, 'delivered'))), 'accepted');
    const stale = expectOutcome(await postCallback(t, source.id, sign.communication(source.secret, communication.messageStatus(messageId, 'sent'))), 'stale');
    const rx = await startReceiver();
    try {
      const ep = (await createEndpoint(c, { url: `${rx.url}/m`, ordering: 'per-message' })).id;
      const dry = await backfill(c, ep, { dryRun: true });
      expect(dry.body).toMatchObject({ total: 1, sample: [{ id: delivered.eventId, stale: false }] });
      const res = await backfill(c, ep, {});
      expect(res.body.total).toBe(1);
      await completed(c, res.body.id);
      expect([...rx.eventIds()]).toEqual([delivered.eventId]);
      expect(rx.eventIds().has(stale.eventId)).toBe(false);
      // Ordered per message as fan-out would have: the same key as the message's other deliveries.
      expect(await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep) }).pluck('order_key')).toEqual([`${source.id}:${messageId}`]);
    } finally {
      await rx.close();
    }
  });

  it("leaves out another endpoint's test events: they were sent to that endpoint only", async () => {
    const c = await t.createTenant('tests');
    const rx = await startReceiver();
    try {
      const tested = (await createEndpoint(c, { url: `${rx.url}/tested` })).id;
      const sent = await c.call('POST', `/v1/endpoints/${tested}/test`, { body: { type: 'order.created', data: { test: true } } });
      expect(sent.status, sent.text).toBe(202);
      const real = await publish(c, 'order.created');
      await eventually(async () => rx.eventIds().size === 2, 'the test and the real event at the tested endpoint');
      const later = (await createEndpoint(c, { url: `${rx.url}/later` })).id;
      const dry = await backfill(c, later, { dryRun: true });
      expect(dry.body).toMatchObject({ total: 1, sample: [{ id: real }] });
      const res = await backfill(c, later, {});
      expect(res.body.total).toBe(1);
      await completed(c, res.body.id);
      const eventKeys: string[] = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', later) }).pluck('event_id');
      expect(eventKeys.map((k) => idOfUuid('event', k))).toEqual([real]);
    } finally {
      await rx.close();
    }
  });

  it('a portal link needs manage, stays within its endpoints, and backfills only its event types', async () => {
    const session = async (body: Record<string, unknown>) => {
      const created = await a.call('POST', '/v1/portal-sessions', { body });
      expect(created.status, created.text).toBe(201);
      const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: new URL(created.body.url).hash.replace(/^#token=/, '') } });
      expect(ex.status, ex.text).toBe(200);
      return { id: 'session', apiKey: '', call: (m, p, o) => t.call(m, p, { ...o, token: ex.body.sessionToken }) } as TestTenant;
    };
    const ep = (await createEndpoint(a, { url: `${rn.url}/portal`, eventTypes: ['order.*', 'invoice.*'] })).id;
    expectError(await backfill(await session({ capabilities: ['read'] }), ep, { dryRun: true }), 403, 'forbidden');
    expectError(await backfill(await session({ capabilities: ['read', 'manage'], endpointIds: [epE] }), ep, { dryRun: true }), 404, 'not_found');
    const invoices = await backfill(await session({ capabilities: ['read', 'manage'], eventTypes: ['invoice.*'] }), ep, { dryRun: true });
    expect(invoices.status, invoices.text).toBe(200);
    expect(invoices.body).toMatchObject({ total: 1, sample: [{ id: ev.i1 }] });
  });

  it('refuses more than REPLAY_MAX_LIMIT events and creates nothing; a narrower window or type list goes through', async () => {
    const rx = await startReceiver();
    try {
      // An empty filter takes all six events: o1 o2 i1 p1 s1 o3.
      const ep = (await createEndpoint(a, { url: `${rx.url}/all` })).id;
      expect((await backfill(a, ep, { dryRun: true })).body.total).toBe(6);
      const tooMany = await backfill(a, ep, {});
      expectError(tooMany, 400, 'backfill_too_large');
      expect(tooMany.body.error.details).toEqual([{ path: 'since', message: expect.stringContaining(`more than ${cap} events match`) }]);
      expect(await deliveriesTo(ep)).toEqual([]);
      const orders = await backfill(a, ep, { eventTypes: ['order.*'] });
      expect(orders.status, orders.text).toBe(202);
      expect(orders.body.total).toBe(4);
      const rest = await backfill(a, ep, {});
      expect(rest.body.total).toBe(2);
      await completed(a, rest.body.id);
      await completed(a, orders.body.id);
      expect(rx.eventIds().size).toBe(6);
      expect(rx.requests).toHaveLength(6);
    } finally {
      await rx.close();
    }
  });

  it('refuses a window holding more events than a backfill reads, whatever it takes of them, and names where to split it', async () => {
    // 10 × REPLAY_MAX_LIMIT = 40 events read at most: 41 in the window, two of them of the type the endpoint takes.
    const c = await t.createTenant('wide window');
    const windowStart = new Date(Date.now() - 1_000).toISOString();
    const kept = [await publish(c, 'audit.kept')];
    await publishMany(c, 39, 4, 'audit.noise');
    kept.push(await publish(c, 'audit.kept'));
    const rx = await startReceiver();
    try {
      const ep = (await createEndpoint(c, { url: `${rx.url}/wide`, eventTypes: ['audit.kept'] })).id;
      const cBackfill = (body: Record<string, unknown>) => backfill(c, ep, { since: windowStart, ...body });
      for (const dryRun of [true, false]) {
        const refused = await cBackfill({ dryRun });
        expectError(refused, 400, 'backfill_too_large');
        expect(refused.body.error.details).toEqual([{ path: 'until', message: expect.stringContaining('the window holds more than 40 events (10 × REPLAY_MAX_LIMIT)') }]);
      }
      expect(await deliveriesTo(ep)).toEqual([]);

      const splitAt = /backfill until (\S+) first/.exec((await cBackfill({ dryRun: true })).body.error.details[0].message)![1]!;
      const first = await cBackfill({ until: splitAt });
      expect(first.status, first.text).toBe(202);
      const rest = await cBackfill({ since: splitAt });
      expect(rest.status, rest.text).toBe(202);
      expect([first.body.total, rest.body.total]).toEqual([1, 1]);
      await completed(c, first.body.id);
      await completed(c, rest.body.id);
      expect(rx.eventIds()).toEqual(new Set(kept));
      expect(rx.requests).toHaveLength(2);
    } finally {
      await rx.close();
    }
  });

  it('refuses a disabled or deleted endpoint with 409', async () => {
    const ep = (await createEndpoint(a, { url: `${rn.url}/gone` })).id;
    const disabled = await a.call('PATCH', `/v1/endpoints/${ep}`, { body: { status: 'disabled' } });
    expect(disabled.status, disabled.text).toBe(200);
    expectError(await backfill(a, ep, {}), 409, 'endpoint_disabled');
    expect((await a.call('DELETE', `/v1/endpoints/${ep}`)).status).toBe(204);
    expectError(await backfill(a, ep, {}), 409, 'endpoint_deleted');
  });

  it('waits while retention checks a day of events, then goes on', async () => {
    // Deliveries have no key to their event: retention holds eventDaysLock from its check of a day
    // until the events watermark has passed it, and a backfill, which writes deliveries of past
    // events, takes it shared first.
    const retention = new pg.Client({ connectionString: t.database.url });
    await retention.connect();
    try {
      await retention.query('SELECT pg_advisory_lock($1::bigint)', [eventDaysLock]);
      const pending = backfill(a, epN, { reason: 'while retention drops a day' });
      await eventually(async () => (await advisoryLockWaiters(t.platform.db, eventDaysLock)) > 0, 'the backfill waiting for retention');
      await retention.query('SELECT pg_advisory_unlock($1::bigint)', [eventDaysLock]);
      const res = await pending;
      expect(res.status, res.text).toBe(202);
    } finally {
      await retention.end();
    }
  });
});
