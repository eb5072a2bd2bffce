import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { recordAttempt, recordSuccesses, type AttemptRecord } from '../../src/delivery/sql/attempts.js';
import { sweep } from '../../src/delivery/sql/sweep.js';
import type { ClaimedDelivery } from '../../src/delivery/sql/claimed.js';
import { newId, uuidOf } from '../../src/domain/ids.js';
import {
  createEndpoint, insertPendingBacklog, insertSucceededDeliveries, startSteppedPlatform, steppedLeaseMs as leaseMs, steppedLimits as limits,
  successOf, type SteppedPlatform,
} from '../helpers/dispatch.js';
import { eventually, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { reportPlans } from '../helpers/plans.js';

/**
 * The record and hand-off functions keep generic plans per connection. A connection that first
 * calls them while `deliveries` is nearly empty (a new database, its first seconds) must still
 * reach rows by key once the table has grown, with no ANALYZE in between: a plan that scanned the
 * table made each hand-off cost O(table) (docs/performance.md, "A plan made on an empty table").
 * Role `api`: no dispatcher, so deliveries move only when the test moves them.
 */

let stepped: SteppedPlatform;
let t: TestPlatform;
let tenant: TestTenant;
let conn: Knex;

beforeAll(async () => {
  stepped = await startSteppedPlatform('plans-on-growing-tables');
  ({ t, tenant, conn } = stepped);
  // Generic plans for every statement that does not choose for itself: what PostgreSQL's plan
  // cache may settle on after a statement's first five runs, made here at once.
  await conn.raw('SET plan_cache_mode = force_generic_plan');
});
afterAll(() => stepped?.stop());

function failure(d: ClaimedDelivery): AttemptRecord {
  return { ...successOf(d), statusCode: 503, outcome: 'retry', errorClass: 'http_503', next: { status: 'pending', at: new Date(Date.now() + 3_600_000) }, endpointFailure: true };
}

/** Admits everything due to local slots and records one success and one failure, each handing its slot on. */
async function cycle(): Promise<{ handedBySuccess?: ClaimedDelivery; handedByFailure?: ClaimedDelivery }> {
  const round = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 2 }, { count: 2, inFlightLeaseMs: leaseMs, mode: 'all' });
  expect(round.claimed.length).toBe(2);
  const [a, b] = round.claimed as [ClaimedDelivery, ClaimedDelivery];
  const [done] = await recordSuccesses(conn, [{ record: successOf(a), handOff: true }], limits, leaseMs);
  const failed = await recordAttempt(conn, failure(b), limits, leaseMs);
  expect(done!.applied && failed.applied).toBe(true);
  return { handedBySuccess: done!.next, handedByFailure: failed.next };
}

/**
 * Index entries this transaction has read per index of delivery_queue. Counted within the
 * transaction, so another backend's reads (flushed to the cumulative statistics up to a second
 * late) never land in the window.
 */
async function queueIndexReadsInTransaction(trx: Knex): Promise<Array<{ index: string; entries: number }>> {
  const { rows } = await trx.raw(
    `SELECT indexrelname AS index, pg_stat_get_xact_tuples_returned(indexrelid) AS n FROM pg_stat_user_indexes WHERE relname = 'delivery_queue'`,
  );
  return rows.map((r: { index: string; n: string }) => ({ index: r.index, entries: Number(r.n) }));
}

/** How this transaction has read deliveries so far: scans of each kind, and rows fetched through an index. */
async function deliveriesScans(): Promise<{ seq: number; idx: number; fetched: number }> {
  const { rows } = await conn.raw(`SELECT seq_scan, idx_scan, idx_tup_fetch FROM pg_stat_xact_user_tables WHERE relname = 'deliveries'`);
  return { seq: Number(rows[0].seq_scan), idx: Number(rows[0].idx_scan), fetched: Number(rows[0].idx_tup_fetch) };
}

describe('plans made while deliveries was nearly empty', () => {
  it('still reach deliveries by key after the table grew to 20,000 rows', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/plans', eventTypes: ['order.*'], maxConcurrency: 4 });
    // Statistics as autovacuum takes them in a new database's first seconds: a few hundred rows.
    const done = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/done', eventTypes: ['order.*'], maxConcurrency: 1 });
    // Finished without passing through the queue: a queue row deleted when its delivery finished
    // leaves its delivery_queue_due entry until vacuum, and a scan cannot mark such entries to be
    // skipped while an older snapshot is open or their page changed under it: then every scan
    // below would read those 200 again.
    await insertSucceededDeliveries(t, tenant.id, done.id, 200);
    await t.platform.db.raw('ANALYZE deliveries');
    // And kept so: an ANALYZE after the table grew would let the cached plans go unexamined.
    await t.platform.db.raw('ALTER TABLE deliveries SET (autovacuum_enabled = false)');
    // The first calls on this connection, with a few deliveries in the table: more than five, since
    // PL/pgSQL plans a statement for its first five runs and may keep a generic plan after that.
    for (let i = 0; i < 8; i++) {
      await insertPendingBacklog(t, tenant.id, ep.id, 2);
      const first = await cycle();
      expect(first.handedBySuccess).toBeUndefined();
    }

    await insertPendingBacklog(t, tenant.id, ep.id, 20_000);
    // Admission and both hand-offs in one transaction, whose own counters say how deliveries and
    // the queue were read.
    let read: Array<{ index: string; entries: number }>;
    await conn.raw('BEGIN');
    try {
      const later = await cycle();
      expect(later.handedBySuccess?.status).toBe('in_flight');
      expect(later.handedByFailure?.status).toBe('in_flight');
      const scans = await deliveriesScans();
      expect(scans.seq).toBe(0);
      expect(scans.idx).toBeGreaterThan(0);
      // By key, not by walking a whole index: joined by merge or hash with deliveries_pkey, or by a
      // loop that started from it, admission and the record of a success read every delivery on
      // each call (docs/performance.md, "Joins that walked the whole table by its index").
      expect(scans.fetched).toBeLessThan(200);
      read = await queueIndexReadsInTransaction(conn);
    } finally {
      await conn.raw('ROLLBACK');
    }
    // The queue too: each step reads a few entries per endpoint, never an index end to end (the
    // mirror's trigger once deleted finished rows through a whole index, all 20,000 entries). The
    // line is a tenth of that. The earlier cycles' dead entries are read again by each scan while
    // an older snapshot of this database keeps them from being marked to be skipped: a loaded CI
    // run read 220 and 291 entries against 45 and 67 alone, and 325 and 443 with a snapshot held
    // on purpose through the cycles.
    expect(read.filter((r) => r.entries > 2_000)).toEqual([]);
    expect(read.reduce((sum, r) => sum + r.entries, 0)).toBeGreaterThan(0);
  });
});

describe('the fan-out look-up beside a tenant of many endpoints', () => {
  it('reads the tenant\'s endpoints by index and never starts parallel workers', async () => {
    // A tenant holding most of the table: a generic plan prices every tenant at the average one.
    const big = await t.createTenant('many-endpoints');
    await t.platform.db.raw(
      `INSERT INTO endpoints (id, tenant_id, url, max_concurrency, secret_enc)
       SELECT id, ?, 'https://many.example.com/hook', 1, 'v1:x' FROM unnest(?::uuid[]) id`,
      [uuidOf('tenant', big.id), `{${Array.from({ length: 20000 }, () => uuidOf('endpoint', newId('endpoint'))).join(',')}}`],
    );
    await t.platform.db.raw('ANALYZE endpoints');
    const small = await t.createTenant('one-endpoint');
    await createEndpoint(small, { url: 'http://127.0.0.1:9/one', eventTypes: [], maxConcurrency: 1 });

    // The plans of the function's statements, as auto_explain reports them to this session.
    const client = new pg.Client({ connectionString: t.database.url });
    const plans: string[] = [];
    await client.connect();
    try {
      await reportPlans(client, plans);
      for (const sql of [
        // Parallel plans made as cheap as they can be: the function's own settings must overrule this.
        'SET parallel_setup_cost = 0',
        'SET parallel_tuple_cost = 0',
        'SET min_parallel_table_scan_size = 0',
        'SET min_parallel_index_scan_size = 0',
      ]) {
        await client.query(sql);
      }
      const { rows } = await client.query<{ n: number }>("SELECT cardinality(fan_out_targets($1, 'order.created', '{}')) AS n", [uuidOf('tenant', small.id)]);
      expect(rows[0]!.n).toBe(1);
    } finally {
      await client.end();
    }
    const lookUps = plans.filter((p) => p.includes('FROM endpoints e'));
    expect(lookUps.length).toBeGreaterThan(0);
    expect(lookUps.every((p) => p.includes('endpoints_tenant'))).toBe(true);
    expect(lookUps.filter((p) => /Gather|Parallel/.test(p))).toEqual([]);
  });
});

describe('plans made while pending deliveries were rare', () => {
  it('walk the endpoint\'s due entries in order, never every pending delivery for each candidate', async () => {
    // Statistics as autovacuum leaves them when a backlog builds up: deliveries last analyzed at
    // rest (every delivery finished, none pending), delivery_queue, analyzed far more often, full.
    const ep = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/rare', eventTypes: ['order.*'], maxConcurrency: 50 })).id;
    await insertPendingBacklog(t, tenant.id, ep, 5_000);
    await t.platform.db.raw("UPDATE deliveries SET status = 'succeeded', next_attempt_at = NULL, succeeded_at = now() WHERE endpoint_id = ?", [uuidOf('endpoint', ep)]);
    await t.platform.db.raw('ANALYZE deliveries');
    await insertPendingBacklog(t, tenant.id, ep, 3_000);
    await t.platform.db.raw('ANALYZE delivery_queue');

    const client = new pg.Client({ connectionString: t.database.url });
    const plans: string[] = [];
    await client.connect();
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    try {
      await reportPlans(client, plans);
      const { rows } = await client.query('SELECT * FROM next_due($1, 10, 3, false)', [uuidOf('endpoint', ep)]);
      expect(rows).toHaveLength(10);
    } finally {
      await client.end();
    }
    // A backend adds its index reads to the database's statistics as it exits, after end() has
    // returned: the sweep's test below counts every backend's reads, and on a loaded machine it
    // once counted this walk over 5,000 dead entries as its own.
    await eventually(async () => (await conn.raw('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ?', [pid])).rows[0].n === 0, 'the explaining backend gone');
    const candidates = plans.filter((p) => p.includes('FROM delivery_queue q'));
    expect(candidates.length).toBeGreaterThan(0);
    for (const plan of candidates) {
      expect(plan).toContain('delivery_queue_due');
      // Each candidate's delivery is read by its id. Any other way to deliveries is a walk over
      // every pending delivery, for each candidate: what a plan made on these statistics did.
      const lines = plan.split('\n');
      const reads = lines.flatMap((line, i) => (/ on deliveries d(_\d+)?\b/.test(line) ? [`${line.trim()} | ${lines[i + 1]?.trim()}`] : []));
      expect(reads.length).toBeGreaterThan(0);
      expect(reads.filter((r) => !/Index Cond: \(id = \(?q\.delivery_id\)?(::text)?\)/.test(r))).toEqual([]);
    }
  });
});

describe('the sweep beside a large backlog', () => {
  it("reads a few queue entries per endpoint with pending work, not the whole backlog, and still dead-letters a disabled endpoint's work", async () => {
    const busy = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/sweep-busy', eventTypes: ['order.*'] })).id;
    const off = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/sweep-off', eventTypes: ['order.*'] })).id;
    await insertPendingBacklog(t, tenant.id, busy, 20_000);
    await insertPendingBacklog(t, tenant.id, off, 3);
    await t.platform.db.raw("UPDATE endpoints SET status = 'disabled' WHERE id = ?", [uuidOf('endpoint', off)]);
    const pending = Number((await conn.raw("SELECT count(*) AS n FROM delivery_queue WHERE status = 'pending'")).rows[0].n);
    expect(pending).toBeGreaterThan(20_000);

    // One transaction (each step a savepoint), so its index reads are counted as its own.
    const { result, read } = await conn.transaction(async (trx) => {
      const result = await sweep(trx, { defaultMaxAttempts: 5, autoDisableAfterSeconds: 86_400 });
      return { result, read: await queueIndexReadsInTransaction(trx) };
    });

    expect(result.deadDisabled).toBe(3);
    expect(await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', off) }).select('status', 'dead_reason')).toEqual(
      Array.from({ length: 3 }, () => ({ status: 'dead', dead_reason: 'endpoint_disabled' })),
    );
    expect(Number((await conn.raw("SELECT count(*) AS n FROM deliveries WHERE endpoint_id = ? AND status = 'pending'", [uuidOf('endpoint', busy)])).rows[0].n)).toBe(20_000);
    // Every sweep of every worker, each second: the dead-letter step once read every pending entry
    // of the queue (a bitmap scan of delivery_queue_deadline) to find nearly always none.
    expect(read.some((r) => r.entries > 0)).toBe(true);
    expect(read.filter((r) => r.entries > 200)).toEqual([]);
  });
});

describe("a delivery's status as the API shows it", () => {
  it("reads the delivery's queue row by its key, not the whole queue", async () => {
    // deliveries.id was text of collation "C", the queue's key of the database's: compared in "C", the
    // key's index could not serve, and each listed delivery read every row of the queue.
    // Sequential scans priced out, so only an index that cannot serve makes one.
    const rows = await conn.transaction(async (trx) => {
      await trx.raw('SET LOCAL enable_seqscan = off');
      return (await trx.raw(
        `EXPLAIN SELECT s.* FROM deliveries d CROSS JOIN LATERAL delivery_state(d.id, d.status, d.attempt_count) s WHERE d.id = ANY(?)`,
        [[newId('delivery'), newId('delivery')].map((id) => uuidOf('delivery', id))],
      )).rows;
    });
    const plan = rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n');
    expect(plan).toContain('delivery_queue_pkey');
    expect(plan).not.toMatch(/Seq Scan on delivery_queue/);
  });
});
