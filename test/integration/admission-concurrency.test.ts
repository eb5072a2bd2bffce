import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue, type AdmissionLimits, type AdmissionRound } from '../../src/delivery/sql/admit.js';
import { uuidOf } from '../../src/domain/ids.js';
import { createDb } from '../../src/infra/db.js';
import { createEndpoint, insertPendingBacklog, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * Admission without a platform-wide lock: two "processes" (separate connection pools) admit at the
 * same moment, over and over, and every limit still holds exactly. Role `api`: no dispatcher, so
 * deliveries only move when the test moves them.
 */

let t: TestPlatform;
let tenant: TestTenant;
let a: Knex;
let b: Knex;
const limits: AdmissionLimits = { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 500 };
const local = { count: 4, inFlightLeaseMs: 30_000 };

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('admission-concurrency');
  a = createDb({ url: t.database.url, poolMax: 4 });
  b = createDb({ url: t.database.url, poolMax: 4 });
});
afterAll(async () => {
  await a?.destroy();
  await b?.destroy();
  await t?.stop();
});

async function busyOf(endpointId: string): Promise<number> {
  // Busy as admission counts it (endpoint_room): a slot's claim is in the queue row only.
  const { rows } = await t.platform.db.raw(`SELECT count(*)::int AS n FROM delivery_queue WHERE endpoint_id = ? AND status IN ('queued', 'in_flight')`, [uuidOf('endpoint', endpointId)]);
  return rows[0].n;
}

/**
 * Both pools admit together, `rounds` times; answers what each admitted in total for the given
 * endpoints (earlier cases' endpoints share the database and may still get work, e.g. as rate
 * tokens refill).
 */
async function admitTogether(rounds: number, endpointIds: string[]): Promise<{ byA: number; byB: number }> {
  const ours = (r: AdmissionRound) => [...r.queued.map((d) => d.endpoint_id), ...r.claimed.map((d) => d.endpoint.id)].filter((id) => endpointIds.includes(id)).length;
  let byA = 0;
  let byB = 0;
  for (let i = 0; i < rounds; i++) {
    const [ra, rb] = await Promise.all([admitDue(a, limits, local), admitDue(b, limits, local)]);
    byA += ours(ra);
    byB += ours(rb);
  }
  return { byA, byB };
}

describe('two admitters at the same moment', () => {
  it('maxConcurrency 3 with 40 due deliveries: exactly 3 admitted between them, never more', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/c', eventTypes: ['conc.*'], maxConcurrency: 3 });
    await publishMany(tenant, 40, 8, 'conc.created');
    const { byA, byB } = await admitTogether(10, [ep.id]);
    expect(byA + byB).toBe(3);
    expect(await busyOf(ep.id)).toBe(3);
  });

  it('rateLimitPerSecond 4: the token bucket is spent once, not once per admitter', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/r', eventTypes: ['rate.*'], maxConcurrency: 50, rateLimitPerSecond: 4 });
    await publishMany(tenant, 30, 8, 'rate.created');
    const { byA, byB } = await admitTogether(5, [ep.id]);
    // A full bucket holds 4 tokens; the rounds take well under a second, so at most one more refills.
    expect(byA + byB).toBeGreaterThanOrEqual(4);
    expect(byA + byB).toBeLessThanOrEqual(5);
    expect(await busyOf(ep.id)).toBe(byA + byB);
  });

  it('a half-open circuit gets its single probe, once between them', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/p', eventTypes: ['probe.*'], maxConcurrency: 10 });
    await publishMany(tenant, 10, 4, 'probe.created');
    // Failed past the threshold, cooldown over: half-open.
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).update({ consecutive_failures: 5, circuit_open_until: new Date(Date.now() - 1_000) });
    const { byA, byB } = await admitTogether(10, [ep.id]);
    expect(byA + byB).toBe(1);
    expect(await busyOf(ep.id)).toBe(1);
  });

  it('per-message ordering: at most one delivery of a message on its way, whoever admits', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/o', eventTypes: ['ord.*'], maxConcurrency: 20, ordering: 'per-message' });
    for (let i = 0; i < 5; i++) {
      for (const message of ['m1', 'm2', 'm3']) {
        const res = await tenant.call('POST', '/v1/events', { body: { type: 'ord.changed', messageId: message, data: { i } }, headers: { 'idempotency-key': `ord-${message}-${i}` } });
        expect(res.status, res.text).toBe(202);
      }
    }
    const { byA, byB } = await admitTogether(10, [ep.id]);
    expect(byA + byB).toBe(3);
    const { rows } = await t.platform.db.raw(
      `SELECT order_key, count(*)::int AS n FROM delivery_queue WHERE endpoint_id = ? AND status IN ('queued', 'in_flight') GROUP BY order_key`,
      [uuidOf('endpoint', ep.id)],
    );
    expect(rows).toHaveLength(3);
    for (const r of rows) expect(r.n).toBe(1);
  });

  it('many endpoints: both admit in parallel and together admit every free slot exactly once', async () => {
    const eps = [];
    for (let i = 0; i < 12; i++) eps.push(await createEndpoint(tenant, { url: `http://127.0.0.1:9/m${i}`, eventTypes: [`many${i}.*`], maxConcurrency: 2 }));
    for (let i = 0; i < 12; i++) await publishMany(tenant, 5, 5, `many${i}.created`);
    const { byA, byB } = await admitTogether(6, eps.map((e) => e.id));
    expect(byA + byB).toBe(24);
    for (const ep of eps) expect(await busyOf(ep.id)).toBe(2);
    // Each round hands this process's free slots out straight in flight, the rest to Redis.
    const { rows } = await t.platform.db.raw(
      `SELECT status, count(*)::int AS n FROM delivery_queue WHERE endpoint_id = ANY(?) AND status IN ('queued', 'in_flight') GROUP BY status`,
      [eps.map((e) => uuidOf('endpoint', e.id))],
    );
    const inFlight = rows.find((r: { status: string }) => r.status === 'in_flight')?.n ?? 0;
    expect(inFlight).toBeGreaterThan(0);
    expect(inFlight).toBeLessThanOrEqual(6 * 2 * local.count);
  });
});

describe('what a round costs', () => {
  it('endpoints with nothing pending are not visited: 2,000 idle endpoints, and the endpoints table is only read by key', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/s', eventTypes: ['scale.*'], maxConcurrency: 1 });
    await publishMany(tenant, 3, 3, 'scale.created');
    // Both ids are stored as the uuids their TypeIDs encode.
    await t.platform.db.raw(
      `INSERT INTO endpoints (id, tenant_id, url, event_types, secret_enc, max_concurrency, status)
       SELECT gen_random_uuid(), ?, 'http://127.0.0.1:9/idle', '{idle.x}', e.secret_enc, 1, 'active'
         FROM generate_series(1, 2000) g, endpoints e WHERE e.id = ?`,
      [uuidOf('tenant', tenant.id), uuidOf('endpoint', ep.id)],
    );
    await t.platform.db.raw('ANALYZE endpoints');
    // In one transaction, so its own scan counters say how the round read the table.
    const { admitted, scans } = await t.platform.db.transaction(async (trx) => {
      const { rows } = await trx.raw('SELECT * FROM admit_due_v4(3, 500, 30, 0, 0, false)');
      const { rows: stats } = await trx.raw(`SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'endpoints'`);
      return { admitted: rows as Array<{ ep_id: string | null }>, scans: stats[0] as { seq_scan: string; idx_scan: string } };
    });
    expect(admitted.map((r) => r.ep_id)).toContain(uuidOf('endpoint', ep.id));
    expect(Number(scans.seq_scan)).toBe(0);
    // A few look-ups per endpoint with pending work (earlier cases' ~20 endpoints included), not
    // one or more for each of the 2,000.
    expect(Number(scans.idx_scan)).toBeLessThan(500);
  });

  it('an endpoint at its concurrency limit is left out before anything is locked; with room again, it is admitted', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/full', eventTypes: ['full.*'], maxConcurrency: 1 });
    await insertPendingBacklog(t, tenant.id, ep.id, 3);
    const [first] = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('id').pluck('id');
    await t.platform.db('deliveries').where({ id: first }).update({ status: 'in_flight', attempt_count: 1, lease_until: new Date(Date.now() + 30_000) });

    // One round in a transaction, which still holds the advisory locks the round took.
    const round = () =>
      t.platform.db.transaction(async (trx) => {
        const { rows } = await trx.raw('SELECT * FROM admit_due_v4(3, 500, 30, 0, 0, false)');
        const { rows: locks } = await trx.raw(
          `SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND classid = 727002
              AND objid::bigint = (uuid_hash(?::uuid)::bigint + 4294967296) % 4294967296`,
          [uuidOf('endpoint', ep.id)],
        );
        return { admitted: (rows as Array<{ ep_id: string | null }>).filter((r) => r.ep_id === uuidOf('endpoint', ep.id)).length, locked: locks[0].n as number };
      });

    expect(await round()).toEqual({ admitted: 0, locked: 0 });
    await t.platform.db('deliveries').where({ id: first }).update({ status: 'succeeded', lease_until: null, succeeded_at: new Date() });
    expect(await round()).toEqual({ admitted: 1, locked: 1 });
  });
});
