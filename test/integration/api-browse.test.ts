import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { expectError, publish } from '../helpers/api.js';
import { idAt } from '../helpers/backdate.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The summaries the portal's overview and event catalog read: GET /v1/event-types,
 * GET /v1/dead-letters/summary and the hourly latency of GET /v1/endpoints/:id/stats, each as an
 * API key and as portal sessions of every kind (read-only, endpoint-scoped, type-scoped); and the
 * audit log, of which a portal session sees only what was done to what it can see.
 */

type Call = TestTenant['call'];

describe('browsing summaries', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  let tenant: TestTenant;
  let other: TestTenant;
  let epAll: string; // every type; answers 200
  let epInvoices: string; // invoice.* only; answers 500, one attempt: dead letters
  const published: Record<string, string[]> = {};
  // Digits, escapes and key order a parse and re-serialisation would change.
  const exactData = '{"z":1,"amount":12345678901234567890.10,"note":"caf\\u00e9","a":[1.0e2]}';

  async function session(body: Record<string, unknown> = {}, owner = tenant): Promise<Call> {
    const created = await owner.call('POST', '/v1/portal-sessions', { body });
    expect(created.status, created.text).toBe(201);
    const token = new URL(created.body.url).hash.replace(/^#token=/, '');
    const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token } });
    expect(ex.status, ex.text).toBe(200);
    return (m, p, o) => t.call(m, p, { ...o, token: ex.body.sessionToken });
  }

  async function send(type: string, n: number, messageId?: string): Promise<void> {
    for (let i = 0; i < n; i++) (published[type] ??= []).push(await publish(tenant, { type, ...(messageId ? { messageId } : {}), data: { i } }));
  }

  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver((req, res) => {
      res.writeHead(req.path === '/invoices' ? 500 : 200).end();
    });
    tenant = await t.createTenant('browse');
    other = await t.createTenant('browse-other');
    epAll = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/all` } })).body.id;
    epInvoices = (
      await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/invoices`, eventTypes: ['invoice.*'], retryPolicy: { maxAttempts: 1 } } })
    ).body.id;
    await send('order.created', 3);
    await send('invoice.paid', 2);
    await send('invoice.voided', 1);
    // The newest invoice.paid carries data whose text must come back exactly.
    const raw = await tenant.call('POST', '/v1/events', { rawBody: `{"type":"invoice.paid","data":${exactData}}`, headers: { 'content-type': 'application/json' } });
    expect(raw.status, raw.text).toBe(202);
    published['invoice.paid']!.push(raw.body.id);
    await publish(other, { type: 'secret.other', data: {} });
    // 7 events to epAll, the 4 invoices also to epInvoices (dead after their one attempt).
    await eventually(async () => {
      const dead = await tenant.call('GET', '/v1/deliveries?status=dead');
      const ok = await tenant.call('GET', '/v1/deliveries?status=succeeded&limit=100');
      return dead.body.data.length === 4 && ok.body.data.length === 7;
    }, 'eleven deliveries finished', 30_000);
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  describe('GET /v1/event-types', () => {
    it('lists each type once, alphabetically, with its count and newest event, its data exactly as received', async () => {
      const res = await tenant.call('GET', '/v1/event-types');
      expect(res.status, res.text).toBe(200);
      expect(res.body.truncated).toBe(false);
      expect(res.body.data.map((e: { type: string; count: number }) => [e.type, e.count])).toEqual([
        ['invoice.paid', 3],
        ['invoice.voided', 1],
        ['order.created', 3],
      ]);
      const paid = res.body.data[0];
      expect(paid).toEqual({
        type: 'invoice.paid',
        count: 3,
        countCapped: false,
        latest: { id: published['invoice.paid']!.at(-1), createdAt: expect.any(String), messageId: null, data: expect.anything() },
      });
      expect(res.text).toContain(`"data":${exactData}`);
      expect(res.body.data[2].latest.id).toBe(published['order.created']!.at(-1));
      expect(res.body.data[2].latest.data).toEqual({ i: 2 });
    });

    it('narrows to what a portal session may see: its types, or the events delivered to its endpoints', async () => {
      const types = async (call: Call) => {
        const res = await call('GET', '/v1/event-types');
        expect(res.status, res.text).toBe(200);
        return res.body.data.map((e: { type: string; count: number }) => `${e.type}:${e.count}`);
      };
      expect(await types(await session())).toEqual(['invoice.paid:3', 'invoice.voided:1', 'order.created:3']);
      expect(await types(await session({ eventTypes: ['order.*'] }))).toEqual(['order.created:3']);
      expect(await types(await session({ eventTypes: ['invoice.voided'] }))).toEqual(['invoice.voided:1']);
      expect(await types(await session({ endpointIds: [epInvoices] }))).toEqual(['invoice.paid:3', 'invoice.voided:1']);
      expect(await types(await session({ endpointIds: [epInvoices], eventTypes: ['order.*'] }))).toEqual([]);
      expect(await types((m, p, o) => other.call(m, p, o))).toEqual(['secret.other:1']);
    });

    it('refuses query parameters it does not name', async () => {
      const res = await tenant.call('GET', '/v1/event-types?type=invoice.paid');
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual([{ path: 'type', message: 'unknown query parameter' }]);
    });

    it('counts up to 1,000 and says when it stopped; lists at most 100 types and says when there are more', async () => {
      const busy = await t.createTenant('busy');
      const now = Date.now();
      // Rows name their events and tenant by the uuids their TypeIDs encode.
      const ids = Array.from({ length: 1_001 }, (_, i) => uuidOf('event', idAt('event', new Date(now - 60_000 + i))));
      await t.platform.db.raw(
        `INSERT INTO events (id, tenant_id, origin, type, body)
         SELECT id, :tenantId, 'api', 'busy.type', '{"data":{}}' FROM unnest(:ids::uuid[]) AS id`,
        { tenantId: uuidOf('tenant', busy.id), ids },
      );
      const capped = await busy.call('GET', '/v1/event-types');
      expect(capped.body.data).toEqual([expect.objectContaining({ type: 'busy.type', count: 1_000, countCapped: true })]);
      await t.platform.db('events').where({ id: ids[0] }).delete();
      const exact = await busy.call('GET', '/v1/event-types');
      expect(exact.body.data).toEqual([expect.objectContaining({ type: 'busy.type', count: 1_000, countCapped: false })]);

      const many = await t.createTenant('many-types');
      const typeIds = Array.from({ length: 101 }, (_, i) => uuidOf('event', idAt('event', new Date(now - 1000 + i))));
      await t.platform.db.raw(
        `INSERT INTO events (id, tenant_id, origin, type, body)
         SELECT id, :tenantId, 'api', 'kind.' || lpad(n::text, 3, '0'), '{"data":{}}' FROM unnest(:ids::uuid[]) WITH ORDINALITY AS u(id, n)`,
        { tenantId: uuidOf('tenant', many.id), ids: typeIds },
      );
      const list = await many.call('GET', '/v1/event-types');
      expect(list.body.truncated).toBe(true);
      expect(list.body.data).toHaveLength(100);
      expect(list.body.data[0].type).toBe('kind.001');
      expect(list.body.data[99].type).toBe('kind.100');
      await t.platform.db('events').where({ tenant_id: uuidOf('tenant', many.id), type: 'kind.101' }).delete();
      expect((await many.call('GET', '/v1/event-types')).body.truncated).toBe(false);
    });

    it("looks for a link limited to endpoints among each type's newest 2,000 events", async () => {
      const owner = await t.createTenant('scan');
      const ep = (await owner.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/scan` } })).body.id;
      const delivered = await publish(owner, { type: 'scan.type', data: {} });
      const limited = await session({ endpointIds: [ep] }, owner);
      const listed = async () => (await limited('GET', '/v1/event-types')).body.data.map((e: { type: string; count: number }) => [e.type, e.count]);
      expect(await listed()).toEqual([['scan.type', 1]]);
      // 2,000 newer events of the type that went to no endpoint push the delivered one out of view.
      const now = Date.now();
      // Stored as the uuids their TypeIDs encode.
      const ids = Array.from({ length: 2_000 }, (_, i) => uuidOf('event', idAt('event', new Date(now + 1_000 + i))));
      await t.platform.db.raw(
        `INSERT INTO events (id, tenant_id, origin, type, body) SELECT id, :tenantId, 'api', 'scan.type', '{"data":{}}' FROM unnest(:ids::uuid[]) AS id`,
        { tenantId: uuidOf('tenant', owner.id), ids },
      );
      expect(await listed()).toEqual([]);
      expect((await owner.call('GET', '/v1/event-types')).body.data).toEqual([expect.objectContaining({ type: 'scan.type', count: 1_000, countCapped: true })]);
      await t.platform.db('events').where({ id: ids[0] }).delete();
      expect(await listed()).toEqual([['scan.type', 1]]);
      expect((await limited('GET', `/v1/events/${delivered}`)).status).toBe(200);
    });
  });

  describe('GET /v1/dead-letters/summary', () => {
    it('counts dead-lettered deliveries by reason and endpoint', async () => {
      const res = await tenant.call('GET', '/v1/dead-letters/summary');
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        total: 4,
        byReason: { max_attempts: 4, max_age: 0, terminal: 0, endpoint_disabled: 0, endpoint_deleted: 0 },
        byEndpoint: [{ endpointId: epInvoices, count: 4 }],
        byEndpointTruncated: false,
      });
      expect((await other.call('GET', '/v1/dead-letters/summary')).body).toMatchObject({ total: 0, byEndpoint: [] });
    });

    it("counts only the deliveries a portal session may see", async () => {
      const total = async (call: Call) => {
        const res = await call('GET', '/v1/dead-letters/summary');
        expect(res.status, res.text).toBe(200);
        return [res.body.total, res.body.byEndpoint.length];
      };
      expect(await total(await session())).toEqual([4, 1]);
      expect(await total(await session({ endpointIds: [epAll] }))).toEqual([0, 0]);
      expect(await total(await session({ endpointIds: [epInvoices] }))).toEqual([4, 1]);
      expect(await total(await session({ eventTypes: ['invoice.voided'] }))).toEqual([1, 1]);
      expect(await total(await session({ eventTypes: ['order.*'] }))).toEqual([0, 0]);
    });

    it('refuses query parameters it does not name', async () => {
      const res = await tenant.call('GET', `/v1/dead-letters/summary?endpointId=${epInvoices}`);
      expectError(res, 400, 'validation_failed');
      expect(res.body.error.details).toEqual([{ path: 'endpointId', message: 'unknown query parameter' }]);
    });
  });

  describe('GET /v1/endpoints/:id/stats series', () => {
    /** percentile_cont: linear interpolation between the closest ranks. */
    const percentile = (sorted: number[], p: number) => {
      const at = p * (sorted.length - 1);
      const lo = Math.floor(at);
      return sorted[lo]! + (sorted[Math.min(lo + 1, sorted.length - 1)]! - sorted[lo]!) * (at - lo);
    };
    const round = (v: number) => Math.round(v * 10) / 10;

    it("gives each hour its latency p50 and p95, null in hours without attempts, for an endpoint a session may see", async () => {
      const byHour = new Map<string, number[]>();
      const deliveries = await tenant.call('GET', `/v1/deliveries?endpointId=${epAll}&limit=100`);
      for (const d of deliveries.body.data as { id: string }[]) {
        for (const a of (await tenant.call('GET', `/v1/deliveries/${d.id}`)).body.attempts as { startedAt: string; durationMs: number }[]) {
          const hour = new Date(Math.floor(Date.parse(a.startedAt) / 3_600_000) * 3_600_000).toISOString();
          byHour.set(hour, [...(byHour.get(hour) ?? []), a.durationMs].sort((x, y) => x - y));
        }
      }
      expect([...byHour.values()].flat()).toHaveLength(7);
      for (const call of [tenant.call, await session({ endpointIds: [epAll] })]) {
        const res = await call('GET', `/v1/endpoints/${epAll}/stats`);
        expect(res.status, res.text).toBe(200);
        for (const bucket of res.body.series as { start: string; attempts: number; latencyMs: { p50: number | null; p95: number | null } }[]) {
          const durations = byHour.get(bucket.start);
          expect({ start: bucket.start, latencyMs: bucket.latencyMs }).toEqual({
            start: bucket.start,
            latencyMs: durations ? { p50: round(percentile(durations, 0.5)), p95: round(percentile(durations, 0.95)) } : { p50: null, p95: null },
          });
          expect(bucket.attempts).toBe(durations?.length ?? 0);
        }
      }
      expectError(await (await session({ endpointIds: [epInvoices] }))('GET', `/v1/endpoints/${epAll}/stats`), 404, 'not_found');
    });

    it('counts only the attempts of the event types a session is limited to', async () => {
      const stats = async (call: Call, id: string) => {
        const res = await call('GET', `/v1/endpoints/${id}/stats`);
        expect(res.status, res.text).toBe(200);
        const series = res.body.series as { attempts: number; failed: number }[];
        return [res.body.attempts, res.body.failed, series.reduce((n, b) => n + b.attempts, 0)];
      };
      expect(await stats(tenant.call, epAll)).toEqual([7, 0, 7]);
      expect(await stats(await session({ eventTypes: ['order.*'] }), epAll)).toEqual([3, 0, 3]);
      expect(await stats(await session({ eventTypes: ['invoice.voided'] }), epInvoices)).toEqual([1, 1, 1]);
      expect(await stats(await session({ eventTypes: ['order.*'] }), epInvoices)).toEqual([0, 0, 0]);
    });
  });

  describe('GET /v1/audit-log', () => {
    const entries = async (call: Call, query = '') => {
      const res = await call('GET', `/v1/audit-log?limit=100${query}`);
      expect(res.status, res.text).toBe(200);
      return (res.body.data as { action: string; target: { type: string; id: string } }[]).map((e) => `${e.action} ${e.target.id}`);
    };

    it('shows a portal link what was done to what it can see, never sources, keys or links', async () => {
      // A dead invoice delivery replayed with the API key: an entry on a delivery of epInvoices.
      const dead = (await tenant.call('GET', `/v1/deliveries?status=dead&endpointId=${epInvoices}`)).body.data[0].id as string;
      expect((await tenant.call('POST', `/v1/deliveries/${dead}/replay`, { body: { reason: 'audit test' } })).status).toBe(202);
      await tenant.call('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'audited source' } });

      const byKey = await entries(tenant.call);
      expect(byKey).toEqual(expect.arrayContaining([`endpoint.created ${epAll}`, `endpoint.created ${epInvoices}`, `delivery.replayed ${dead}`]));
      expect(byKey.some((e) => e.startsWith('source.created'))).toBe(true);
      expect(byKey.some((e) => e.startsWith('portal_session.created'))).toBe(true);

      const everything = await entries(await session());
      expect(everything).toEqual(expect.arrayContaining([`endpoint.created ${epAll}`, `endpoint.created ${epInvoices}`, `delivery.replayed ${dead}`]));
      expect(everything.filter((e) => /^(source|portal_session|api_key|tenant)\./.test(e))).toEqual([]);

      expect(await entries(await session({ endpointIds: [epAll] }))).toEqual([`endpoint.created ${epAll}`]);
      const invoices = await entries(await session({ endpointIds: [epInvoices] }));
      expect(invoices).toEqual(expect.arrayContaining([`endpoint.created ${epInvoices}`, `delivery.replayed ${dead}`]));
      expect(invoices).not.toContain(`endpoint.created ${epAll}`);
      // The replayed delivery is an invoice: a link limited to orders does not see it.
      expect(await entries(await session({ eventTypes: ['order.*'] }))).not.toContain(`delivery.replayed ${dead}`);
      // Filters narrow further and cannot widen: asking for sources finds nothing.
      expect(await entries(await session(), '&targetType=source')).toEqual([]);
      expect(await entries((m, p, o) => other.call(m, p, o))).not.toContain(`endpoint.created ${epAll}`);
    });

    it('shows a narrowed link the replays it started, not the tenant\'s', async () => {
      const mine = await session({ capabilities: ['read', 'manage'], endpointIds: [epInvoices] });
      const started = await mine('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId: epInvoices }, reason: 'mine' } });
      expect(started.status, started.text).toBe(202);
      const byKey = await tenant.call('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId: epInvoices }, reason: 'the tenant' } });
      expect(byKey.status, byKey.text).toBe(202);
      const seen = await entries(mine, '&targetType=replay');
      expect(seen).toContain(`replay.started ${started.body.id}`);
      expect(seen).not.toContain(`replay.started ${byKey.body.id}`);
      expect(await entries(await session(), '&targetType=replay')).toEqual(expect.arrayContaining([`replay.started ${started.body.id}`, `replay.started ${byKey.body.id}`]));
    });
  });
});
