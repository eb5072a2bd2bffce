import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { recordSuccesses, type SuccessItem } from '../../src/delivery/sql/attempts.js';
import { sweep } from '../../src/delivery/sql/sweep.js';
import { vacuumMirror } from '../../src/delivery/sql/mirror-vacuum.js';
import { replayOne } from '../helpers/replay.js';
import { createEndpoint, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';

/**
 * delivery_queue (migration 20261201000024): the mirror of unfinished deliveries that the scheduler
 * reads to find rows. Role `api`: no worker, so deliveries move only when the test moves them, each
 * through the platform's own statements.
 */

let t: TestPlatform;
let tenant: TestTenant;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('queue');
});
afterAll(async () => {
  await t?.stop();
});

const unfinished = UNFINISHED_STATUSES;

/** Every unfinished delivery of the endpoint next to its queue row, as the scheduler would read it. */
async function mirror(endpointId: string) {
  const db = t.platform.db;
  const deliveries = await db('deliveries').where({ endpoint_id: endpointId }).whereIn('status', unfinished).orderBy('id')
    .select('id', 'status', 'next_attempt_at', 'lease_until', 'deadline_at');
  const queue = await db('delivery_queue').where({ endpoint_id: endpointId }).orderBy('delivery_id')
    .select('delivery_id as id', 'status', 'next_attempt_at', 'lease_until', 'deadline_at');
  return { deliveries, queue };
}

function success(d: { id: string; tenant_id: string; attempt_count: number; lease_token: number; endpoint: { id: string } }): SuccessItem {
  return {
    handOff: true,
    record: {
      deliveryId: d.id, endpointId: d.endpoint.id, attemptNumber: d.attempt_count, leaseToken: d.lease_token, trigger: 'initial',
      startedAt: new Date(), durationMs: 2, statusCode: 200, outcome: 'success', errorClass: null, errorMessage: null,
      responseExcerpt: 'ok', next: { status: 'succeeded' }, endpointFailure: false,
    },
  };
}

describe('delivery_queue mirrors the unfinished deliveries through every transition', () => {
  it('fan-out, admission, hand-off, success, lost lease, replay and deleting the endpoint', async () => {
    const db = t.platform.db;
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/q', eventTypes: ['q.*'] });
    await publishMany(tenant, 6, 2, 'q.created');

    let m = await mirror(ep.id);
    expect(m.deliveries).toHaveLength(6);
    expect(m.queue).toEqual(m.deliveries);
    expect(m.queue.every((r) => r.status === 'pending')).toBe(true);

    // Admission takes two in flight; the mirror follows, lease and all.
    await db('endpoints').where({ id: ep.id }).update({ max_concurrency: 2 });
    const round = await admitDue(db, { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 100 }, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' });
    expect(round.claimed).toHaveLength(2);
    m = await mirror(ep.id);
    expect(m.queue).toEqual(m.deliveries);
    expect(m.queue.filter((r) => r.status === 'in_flight').map((r) => r.id).sort()).toEqual(round.claimed.map((c) => c.id).sort());

    // Both succeed; each hands its slot to the next due delivery. The succeeded ones leave the queue.
    const recorded = await recordSuccesses(db, round.claimed.map(success), { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 }, 30_000);
    expect(recorded.every((r) => r.applied && r.next?.status === 'in_flight')).toBe(true);
    m = await mirror(ep.id);
    expect(m.deliveries).toHaveLength(4);
    expect(m.queue).toEqual(m.deliveries);
    expect(await db('delivery_queue').whereIn('delivery_id', round.claimed.map((c) => c.id)).count('* as n').first()).toEqual({ n: 0 });

    // A lease that ran out: the sweep finds the row through the queue and puts it back to pending.
    const handed = recorded.map((r) => r.next!.id);
    await db('deliveries').whereIn('id', handed).update({ lease_until: new Date(Date.now() - 1_000) });
    expect((await sweep(db, { defaultMaxAttempts: 10, autoDisableAfterSeconds: 3_600 })).lostInFlight).toBe(2);
    m = await mirror(ep.id);
    expect(m.queue).toEqual(m.deliveries);
    expect(m.queue.every((r) => r.status === 'pending')).toBe(true);

    // Replaying a succeeded delivery brings it back into the queue.
    const replay = await replayOne(tenant, round.claimed[0]!.id, 'the receiver lost it');
    expect(replay.status).toBe(202);
    m = await mirror(ep.id);
    expect(m.deliveries).toHaveLength(5);
    expect(m.queue).toEqual(m.deliveries);

    // Deleting the endpoint dead-letters what waits; the queue lets go of all of it.
    expect((await tenant.call('DELETE', `/v1/endpoints/${ep.id}`)).status).toBe(204);
    m = await mirror(ep.id);
    expect(m).toEqual({ deliveries: [], queue: [] });
    expect(await db('deliveries').where({ endpoint_id: ep.id, status: 'dead', dead_reason: 'endpoint_deleted' }).count('* as n').first()).toEqual({ n: 5 });
  });
});

describe('deliveries can be updated in place', () => {
  it('no index of deliveries covers a column that a status change writes, so such an update can be HOT', async () => {
    // An update is HOT only if it changes no column that any index uses, as a key, an expression
    // or in its predicate. These are the columns the admission, hand-off and record statements write.
    const written = ['status', 'attempt_count', 'lease_until', 'next_attempt_at', 'next_trigger', 'last_status_code', 'last_error', 'succeeded_at', 'updated_at'];
    const { rows } = await t.platform.db.raw<{ rows: Array<{ index: string; columns: string[]; predicate: string | null }> }>(
      `SELECT i.indexrelid::regclass::text AS index,
              ARRAY(SELECT a.attname FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) AS columns,
              pg_get_expr(i.indpred, i.indrelid) AS predicate
         FROM pg_index i WHERE i.indrelid = 'deliveries'::regclass`,
    );
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) {
      for (const column of written) {
        expect(r.columns, r.index).not.toContain(column);
        expect(r.predicate ?? '', r.index).not.toMatch(new RegExp(`\\b${column}\\b`));
      }
    }
  });
});

describe('the sweep vacuums the queue', () => {
  it('removes the entries of deliveries that left it, at most once a second across processes', async () => {
    const db = t.platform.db;
    const count = async () => Number((await db('pg_stat_user_tables').where({ relname: 'delivery_queue' }).first('vacuum_count')).vacuum_count);
    // Whatever vacuumed last (this platform's own sweep, autovacuum), a second later it is due.
    await new Promise((r) => setTimeout(r, 1_100));
    const before = await count();
    expect(await vacuumMirror(db)).toBe(true);
    // VACUUM reports its statistics as it ends, so the next process sees that it just ran.
    expect(await vacuumMirror(db)).toBe(false);
    expect(await count()).toBe(before + 1);
    await new Promise((r) => setTimeout(r, 1_100));
    expect(await vacuumMirror(db)).toBe(true);
    expect(await count()).toBe(before + 2);
  });
});
