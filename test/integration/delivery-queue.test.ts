import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { recordSuccesses, type SuccessItem } from '../../src/delivery/sql/attempts.js';
import { sweep } from '../../src/delivery/sql/sweep.js';
import { vacuumMirror } from '../../src/delivery/sql/mirror-vacuum.js';
import { replayOne } from '../helpers/replay.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { createEndpoint, getDelivery, publishMany } from '../helpers/dispatch.js';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

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

/**
 * Every unfinished delivery of the endpoint, with its status as the API shows it (a slot's claim is
 * kept in the queue row only: delivery_state), next to its queue row, as the scheduler would read it.
 */
async function mirror(endpointId: string) {
  const db = t.platform.db;
  const { rows: deliveries } = await db.raw(
    `SELECT d.id, s.status, d.next_attempt_at, d.deadline_at
       FROM deliveries d CROSS JOIN LATERAL delivery_state(d.id, d.status, d.attempt_count) s
      WHERE d.endpoint_id = ? AND d.status = ANY(?) ORDER BY d.id`,
    [uuidOf('endpoint', endpointId), [...unfinished]],
  );
  const queue = await db('delivery_queue').where({ endpoint_id: uuidOf('endpoint', endpointId) }).orderBy('delivery_id')
    .select('delivery_id as id', 'status', 'next_attempt_at', 'deadline_at');
  return { deliveries, queue };
}

/** The claims held in the endpoint's queue rows: attempt number and lease of each in flight. */
async function claims(endpointId: string) {
  const rows: Array<{ id: string; attempt_count: number | null; leased: boolean }> = await t.platform.db('delivery_queue')
    .where({ endpoint_id: uuidOf('endpoint', endpointId), status: 'in_flight' }).orderBy('delivery_id')
    .select('delivery_id as id', 'attempt_count', t.platform.db.raw('lease_until > now() AS leased'));
  return rows;
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

    // Admission takes two in flight for slots of this process: the claims are written to the queue
    // rows only, with their attempt numbers and leases; `deliveries` is not written.
    await db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).update({ max_concurrency: 2 });
    const before = await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('id').select('id', 'status', 'attempt_count', 'lease_until', 'updated_at');
    const round = await admitDue(db, { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 100 }, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' });
    expect(round.claimed).toHaveLength(2);
    expect(await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('id').select('id', 'status', 'attempt_count', 'lease_until', 'updated_at')).toEqual(before);
    m = await mirror(ep.id);
    expect(m.queue).toEqual(m.deliveries);
    expect(m.queue.filter((r) => r.status === 'in_flight').map((r) => r.id).sort()).toEqual(round.claimed.map((c) => uuidOf('delivery', c.id)).sort());
    expect(await claims(ep.id)).toEqual(round.claimed.map((c) => ({ id: uuidOf('delivery', c.id), attempt_count: 1, leased: true })).sort((x, y) => (x.id < y.id ? -1 : 1)));

    // Both succeed; each hands its slot to the next due delivery. The succeeded ones leave the queue.
    const recorded = await recordSuccesses(db, round.claimed.map(success), { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 }, 30_000);
    expect(recorded.every((r) => r.applied && r.next?.status === 'in_flight')).toBe(true);
    m = await mirror(ep.id);
    expect(m.deliveries).toHaveLength(4);
    expect(m.queue).toEqual(m.deliveries);
    expect(await db('delivery_queue').whereIn('delivery_id', round.claimed.map((c) => uuidOf('delivery', c.id))).count('* as n').first()).toEqual({ n: 0 });

    // A lease that ran out: the sweep finds the claim in the queue and puts the delivery back to
    // pending, the lost attempt counted on it.
    const handed = recorded.map((r) => uuidOf('delivery', r.next!.id));
    await db('delivery_queue').whereIn('delivery_id', handed).update({ lease_until: new Date(Date.now() - 1_000) });
    expect((await sweep(db, { defaultMaxAttempts: 10, autoDisableAfterSeconds: 3_600 })).lostInFlight).toBe(2);
    m = await mirror(ep.id);
    expect(m.queue).toEqual(m.deliveries);
    expect(m.queue.every((r) => r.status === 'pending')).toBe(true);
    expect(await claims(ep.id)).toEqual([]);
    expect(await db('deliveries').whereIn('id', handed).pluck('attempt_count')).toEqual([1, 1]);

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
    expect(await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id), status: 'dead', dead_reason: 'endpoint_deleted' }).count('* as n').first()).toEqual({ n: 5 });
  });
});

describe('a delivery deleted from deliveries', () => {
  it('takes its queue row with it, and leaves the others', async () => {
    // No route deletes an unfinished delivery; a tenant's deletion does, through its endpoints.
    // The queue has no foreign key to deliveries: the mirror's trigger is what removes the row.
    const db = t.platform.db;
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/removed', eventTypes: ['removed.*'] });
    await publishMany(tenant, 3, 1, 'removed.created');
    const ids: string[] = await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('id').pluck('id');
    expect(ids).toHaveLength(3);
    expect(await db('delivery_queue').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('delivery_id').pluck('delivery_id')).toEqual(ids);
    await db('deliveries').whereIn('id', ids.slice(0, 2)).del();
    expect(await db('delivery_queue').where({ endpoint_id: uuidOf('endpoint', ep.id) }).pluck('delivery_id')).toEqual(ids.slice(2));
    expect((await mirror(ep.id)).queue.map((r) => r.id)).toEqual(ids.slice(2));
  });
});

describe('a claim kept in the queue row only', () => {
  const admission = { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 100 };
  const limits = { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 };

  it('is not dead-lettered for its age by a sweep that read the queue before the claim committed', async () => {
    const db = t.platform.db;
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/aged', eventTypes: ['aged.*'] });
    await publishMany(tenant, 1, 1, 'aged.created');
    const { id: stored } = await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).first('id');
    const id = idOfUuid('delivery', stored);
    // Its maximum age ends a second from now (written before any claim, so the queue row follows):
    // claimed just before, swept just after, by a sweep whose snapshot predates the claim's commit.
    const { rows: [{ deadline }] } = await db.raw(`UPDATE deliveries SET deadline_at = now() + interval '1 second' WHERE id = ? RETURNING deadline_at AS deadline`, [stored]);

    // The claim's transaction holds the delivery's lock while the sweep starts.
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    type Claim = Parameters<typeof success>[0];
    let claimed: Claim[] = [];
    const claiming = db.transaction(async (trx) => {
      // The round as admitDue runs it (which refuses a caller's transaction), everything local.
      const { rows } = await trx.raw('SELECT * FROM admit_due_v4(5, 100, 30, 10, 30000, true) WHERE id = ?', [stored]);
      claimed = rows.map((r: { id: string; tenant_id: string; attempt_count: number; lease_token: string; ep_id: string }) =>
        ({ id: idOfUuid('delivery', r.id), tenant_id: idOfUuid('tenant', r.tenant_id), attempt_count: r.attempt_count, lease_token: Number(r.lease_token), endpoint: { id: idOfUuid('endpoint', r.ep_id) } }));
      await committed;
    });
    await eventually(async () => claimed.length === 1, 'the claim, not yet committed');
    await eventually(async () => (await db.raw('SELECT now() > ? AS past', [deadline])).rows[0].past, 'the maximum age passed');
    const sweeping = sweep(db, { defaultMaxAttempts: 10, autoDisableAfterSeconds: 3_600 });
    // The sweep either skips the locked delivery at once or waits for its lock: commit when either shows.
    await eventually(async () => {
      if (await Promise.race([sweeping.then(() => true), new Promise<false>((r) => setTimeout(() => r(false), 20))])) return true;
      const { rows } = await db.raw(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`);
      return rows[0].n > 0;
    }, 'the sweep under way');
    commit();
    await claiming;
    expect((await sweeping).deadMaxAge).toBe(0);
    expect(await getDelivery(tenant, id)).toMatchObject({ status: 'in_flight', attemptCount: 1 });

    // Its result is recorded as usual; the next sweep has nothing of it left to take.
    const [recorded] = await recordSuccesses(db, [success(claimed[0]!)].map((s) => ({ ...s, handOff: false })), limits, 30_000);
    expect(recorded).toEqual({ applied: true });
    expect(await getDelivery(tenant, id)).toMatchObject({ status: 'succeeded', attemptCount: 1 });
  });

  it('is never made for a delivery past its maximum age: the sweep dead-letters it, unsent', async () => {
    const db = t.platform.db;
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/expired', eventTypes: ['expired.*'] });
    await publishMany(tenant, 2, 1, 'expired.created');
    const [expired, live] = ((await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).orderBy('id').pluck('id')) as string[]).map((id) => idOfUuid('delivery', id));
    await db('deliveries').where({ id: uuidOf('delivery', expired!) }).update({ deadline_at: new Date(Date.now() - 1_000) });
    const round = await admitDue(db, admission, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' });
    expect(round.claimed.filter((c) => c.endpoint.id === ep.id).map((c) => c.id)).toEqual([live]);
    expect((await sweep(db, { defaultMaxAttempts: 10, autoDisableAfterSeconds: 3_600 })).deadIds).toContain(expired);
    expect(await getDelivery(tenant, expired!)).toMatchObject({ status: 'dead', deadReason: 'max_age', attemptCount: 0 });
  });

  it("is left to finish when its endpoint is deleted, and its result is recorded; what waited is dead-lettered", async () => {
    const db = t.platform.db;
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/deleted', eventTypes: ['deleted.*'], maxConcurrency: 1 });
    await publishMany(tenant, 2, 1, 'deleted.created');
    const [c] = (await admitDue(db, admission, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' })).claimed.filter((x) => x.endpoint.id === ep.id);
    expect((await tenant.call('DELETE', `/v1/endpoints/${ep.id}`)).status).toBe(204);
    expect(await getDelivery(tenant, c!.id)).toMatchObject({ status: 'in_flight' });
    const waited = (await db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).whereNot({ id: uuidOf('delivery', c!.id) }).first('status', 'dead_reason'));
    expect(waited).toEqual({ status: 'dead', dead_reason: 'endpoint_deleted' });
    const [recorded] = await recordSuccesses(db, [{ ...success(c!), handOff: false }], limits, 30_000);
    expect(recorded).toEqual({ applied: true });
    expect(await getDelivery(tenant, c!.id)).toMatchObject({ status: 'succeeded' });
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
