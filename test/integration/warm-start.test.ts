/**
 * Warm start: a process opens DB_POOL_MIN connections before it reports ready, and each new pooled
 * connection has run its role's hot statements once (src/infra/sql.ts, WarmUp), changing nothing.
 * What PostgreSQL shows: the sessions open when startPlatform returns, the statements a warmed
 * session has prepared (pg_prepared_statements is per session, so it is read on that session), and
 * the rows, which the warm-up's rolled-back transaction leaves as they were.
 */
import { Writable } from 'node:stream';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { warmDispatch } from '../../src/delivery/index.js';
import { locksBesideEventPartitions } from '../../src/domain/lock-table.js';
import { runOn, warmConnection } from '../../src/infra/sql.js';
import { warmPublish } from '../../src/store/events-store.js';
import { warmIntake } from '../../src/store/intake-store.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

const poolMin = 6;
let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api', env: { DB_POOL_MIN: String(poolMin) } });
});

afterAll(async () => {
  await t?.stop();
});

async function withSession<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: t.database.url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const count = async (client: pg.Client, sql: string): Promise<number> => Number((await client.query<{ n: string }>(sql)).rows[0]!.n);

describe('warm start', () => {
  it('DB_POOL_MIN connections are open when the process reports ready, before any request', async () => {
    const sessions = await withSession((c) => count(c, 'SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()'));
    expect(sessions).toBeGreaterThanOrEqual(poolMin);
  });

  it('a warmed session has prepared the hot statements and written nothing', async () => {
    const tenant = await t.createTenant('warm');
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/hook' } });
    expect(endpoint.status).toBe(201);
    await withSession(async (c) => {
      const rowsBefore = await count(c, 'SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM receipts) AS n');
      const failed = await warmConnection(c, [warmIntake, warmPublish, warmDispatch]);
      expect(failed).toBeUndefined();
      const prepared = (await c.query<{ name: string }>('SELECT name FROM pg_prepared_statements ORDER BY name')).rows.map((r) => r.name);
      expect(prepared).toEqual(
        expect.arrayContaining(['admit_due', 'claim_delivery', 'intake_accept_many', 'intake_repeats', 'publish_events', 'record_attempt', 'record_successes', 'warm_up_hand_off']),
      );
      // The session is usable as it was: not left inside the warm-up's transaction.
      expect((await c.query<{ outside: boolean }>("SELECT now() = statement_timestamp() AS outside")).rows[0]).toMatchObject({ outside: true });
      expect(await count(c, 'SELECT (SELECT count(*) FROM events) + (SELECT count(*) FROM deliveries) + (SELECT count(*) FROM receipts) AS n')).toBe(rowsBefore);
    });
  });

  it("a warm-up writes only rows of a tenant, endpoint and source of its own, below every real one, and leaves a real tenant's pending delivery as it was", async () => {
    // A real tenant's delivery, pending (role api: nothing dispatches it), which the warm-up's
    // admission round finds beside its own.
    const tenant = await t.createTenant('warm-beside');
    expect((await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/beside' } })).status).toBe(201);
    expect((await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { n: 1 } } })).status).toBe(202);
    expect((await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'beside' } })).status).toBe(201);
    await withSession(async (c) => {
      const realRows = async () => ({
        deliveries: (await c.query("SELECT id, status, attempt_count, lease_until, updated_at FROM deliveries WHERE tenant_id IN (SELECT id FROM tenants WHERE name <> 'warm-up') ORDER BY id")).rows,
        queue: (await c.query("SELECT delivery_id, status, attempt_count, lease_until FROM delivery_queue WHERE tenant_id IN (SELECT id FROM tenants WHERE name <> 'warm-up') ORDER BY delivery_id")).rows,
        endpoints: (await c.query("SELECT id, status, consecutive_failures, rate_tokens FROM endpoints WHERE url <> 'https://warm-up.invalid/' ORDER BY id")).rows,
      });
      const before = await realRows();
      expect(before.deliveries.some((d: { status: string }) => d.status === 'pending')).toBe(true);
      // The warm-ups inside a transaction of the test's own, so what they wrote can be read before
      // it is rolled back: rows whose version this transaction made, and its own counts per table.
      await c.query('BEGIN');
      try {
        for (const warmUp of [warmIntake, warmPublish, warmDispatch]) await warmUp((st, values) => runOn(c, st, values));
        const written = await c.query<{ tbl: string; tenant_id: string | null; endpoint_id: string | null; source_id: string | null }>(`
          WITH mine AS (SELECT pg_current_xact_id()::xid AS x)
          SELECT 'tenants' AS tbl, id AS tenant_id, NULL::uuid AS endpoint_id, NULL AS source_id FROM tenants, mine WHERE xmin = mine.x
          UNION ALL SELECT 'endpoints', tenant_id, id, NULL FROM endpoints, mine WHERE xmin = mine.x
          UNION ALL SELECT 'sources', tenant_id, NULL, id FROM sources, mine WHERE xmin = mine.x
          UNION ALL SELECT 'events', tenant_id, NULL, source_id FROM events, mine WHERE xmin = mine.x
          UNION ALL SELECT 'deliveries', tenant_id, endpoint_id, NULL FROM deliveries, mine WHERE xmin = mine.x
          UNION ALL SELECT 'delivery_queue', tenant_id, endpoint_id, NULL FROM delivery_queue, mine WHERE xmin = mine.x
          UNION ALL SELECT 'messages', tenant_id, NULL, source_id FROM messages, mine WHERE xmin = mine.x
          UNION ALL SELECT 'receipts', tenant_id, NULL, source_id FROM receipts, mine WHERE xmin = mine.x
          UNION ALL SELECT 'event_keys', NULL, NULL, scope_id FROM event_keys, mine WHERE xmin = mine.x`);
        const real = (await c.query<{ tenant: string; endpoint: string; source: string }>(
          `SELECT (SELECT min(id::text) FROM tenants WHERE name <> 'warm-up') AS tenant,
                  (SELECT min(id::text) FROM endpoints WHERE url <> 'https://warm-up.invalid/') AS endpoint,
                  (SELECT min(id) FROM sources WHERE name <> 'warm-up') AS source`,
        )).rows[0]!;
        expect(new Set(written.rows.map((r) => r.tbl))).toEqual(new Set(['tenants', 'endpoints', 'sources', 'events', 'deliveries', 'delivery_queue', 'messages', 'receipts', 'event_keys']));
        const below = (id: string | null, realMin: string) => id === null || id < realMin;
        expect(written.rows.filter((r) => !below(r.tenant_id, real.tenant) || !below(r.endpoint_id, real.endpoint) || !below(r.source_id, real.source))).toEqual([]);
        // Every platform table the warm-ups inserted into, updated or deleted from, partitions under
        // their parent (the test helpers' transition log keeps its own schema).
        const touched = await c.query<{ tbl: string }>(`
          SELECT DISTINCT coalesce(p.relname, s.relname) AS tbl
            FROM pg_stat_xact_user_tables s LEFT JOIN pg_inherits i ON i.inhrelid = s.relid LEFT JOIN pg_class p ON p.oid = i.inhparent
           WHERE s.schemaname = 'public' AND s.n_tup_ins + s.n_tup_upd + s.n_tup_del > 0 ORDER BY 1`);
        expect(touched.rows.map((r) => r.tbl)).toEqual(['attempts', 'deliveries', 'delivery_queue', 'endpoints', 'event_keys', 'events', 'messages', 'receipts', 'sources', 'tenants']);
        expect(await realRows()).toEqual(before);
        // Its admission round held the real endpoint's try-lock and locked its pending delivery;
        // both are given back with the round, not held until the warm-up ends: another process's
        // round can take them now.
        await withSession(async (other) => {
          await other.query('BEGIN');
          const endpoints = (await other.query<{ taken: boolean }>(
            "SELECT pg_try_advisory_xact_lock(727002, uuid_hash(id)) AS taken FROM endpoints WHERE url <> 'https://warm-up.invalid/'",
          )).rows;
          expect(endpoints.length).toBeGreaterThan(0);
          expect(endpoints.every((e) => e.taken)).toBe(true);
          const pending = before.deliveries.filter((d: { status: string }) => d.status === 'pending').map((d: { id: string }) => d.id);
          expect((await other.query('SELECT id FROM deliveries WHERE id = ANY($1::uuid[]) FOR UPDATE NOWAIT', [pending])).rowCount).toBe(pending.length);
          await other.query('ROLLBACK');
        });
      } finally {
        await c.query('ROLLBACK');
      }
      expect(await realRows()).toEqual(before);
      expect(await count(c, "SELECT count(*) AS n FROM tenants WHERE name = 'warm-up'")).toBe(0);
    });
  });

  it('the warmed pool serves a publish as usual', async () => {
    const tenant = await t.createTenant('warm-publish');
    const res = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { n: 1 } }, headers: { 'Idempotency-Key': 'warm-1' } });
    expect(res.status).toBe(202);
  });
});

/**
 * What a worker logged at start with this environment, and the server's lock table: its room and
 * what connections busy with `partitions` partitions of events would hold, worked out here from the settings.
 */
async function workerStart(
  env: Record<string, string>,
  partitions: number,
): Promise<{ warning: string | undefined; fields: Record<string, unknown>; locks: number; holds: number; needs: number; fits: number }> {
  let logs = '';
  const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logs += chunk.toString()), done()) });
  const worker = await startTestPlatform({ role: 'worker', logs: sink, env });
  try {
    const { rows } = await worker.platform.db.raw<{ rows: Array<{ locks: number; connections: number; prepared: number; reserved: number }> }>(`
      SELECT current_setting('max_locks_per_transaction')::int AS locks, current_setting('max_connections')::int AS connections,
             current_setting('max_prepared_transactions')::int AS prepared,
             current_setting('superuser_reserved_connections')::int + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved`);
    const r = rows[0]!;
    const slots = r.connections + r.prepared;
    const needs = (r.connections - r.reserved) * (partitions + locksBesideEventPartitions);
    const line = logs.split('\n').find((l) => l.includes('"level":40') && l.includes('lock table is too small'));
    const fields = line ? (JSON.parse(line) as Record<string, unknown>) : {};
    return { warning: fields.msg as string | undefined, fields, locks: r.locks, holds: r.locks * slots, needs, fits: Math.ceil(needs / slots) };
  } finally {
    await worker.stop();
  }
}

describe('start-up checks', () => {
  it("a dispatching role names the max_locks_per_transaction that the partitions of events kept need, when the server's is short", async () => {
    // 3,000 days, today and 8 days ahead, cut by week: the 430 weeks they span, and one more since
    // they need not begin on a Monday.
    const start = await workerStart({ RETENTION_DAYS: '3000' }, 431);
    expect(start.needs).toBeGreaterThan(start.holds);
    expect(start.warning).toContain('too small for 431 partitions of events');
    expect(start.warning).toContain(`set max_locks_per_transaction to at least ${start.fits} `);
    expect(start.fields).toMatchObject({ maxLocksPerTransaction: start.locks, maxLocksPerTransactionNeeded: start.fits, eventPartitions: 431 });
  });

  it('counts the days that dead letters keep, when they are kept longer', async () => {
    const start = await workerStart({ RETENTION_DAYS: '3', DEAD_LETTER_RETENTION_DAYS: '3000' }, 431);
    expect(start.warning).toContain('too small for 431 partitions of events');
  });

  it('and says nothing when the lock table holds the partitions kept', async () => {
    // 3 days kept (the default maximum event age), today and 8 ahead: 12 days, cut by day, fit any
    // server's lock table.
    const start = await workerStart({ RETENTION_DAYS: '3', DEAD_LETTER_RETENTION_DAYS: '3' }, 12);
    expect(start.needs).toBeLessThanOrEqual(start.holds);
    expect(start.warning).toBeUndefined();
  });

  it('a dispatching role warns when the server runs without autovacuum, and only then', async () => {
    let logs = '';
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logs += chunk.toString()), done()) });
    const worker = await startTestPlatform({ role: 'worker', logs: sink });
    try {
      const { rows } = await worker.platform.db.raw<{ rows: Array<{ autovacuum: string }> }>('SHOW autovacuum');
      const warned = logs.split('\n').some((line) => line.includes('"level":40') && line.includes('autovacuum is off'));
      expect(warned).toBe(rows[0]!.autovacuum === 'off');
    } finally {
      await worker.stop();
    }
  });
});
