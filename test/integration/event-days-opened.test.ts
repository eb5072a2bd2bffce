import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { claimDelivery, recordSuccesses } from '../../src/delivery/sql/attempts.js';
import type { ClaimedDelivery } from '../../src/delivery/sql/claimed.js';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { ensurePartitions } from '../../src/store/partitions-store.js';
import { daysAgo, idAt } from '../helpers/backdate.js';
import {
  createEndpoint, insertPendingBacklog, startSteppedPlatform, steppedLeaseMs as leaseMs, steppedLimits as limits, successOf, type SteppedPlatform,
} from '../helpers/dispatch.js';
import type { TestPlatform, TestTenant } from '../helpers/platform.js';

/**
 * Admission, hand-offs and the claims of queued deliveries read each delivery's event from
 * `events`, one partition a day. A join
 * that finds the event by a value of another row opens every partition on each run, so their
 * cost grew with RETENTION_DAYS; they open only the days their deliveries' events lie in
 * (db/functions/event_in_range.sql). What a statement opened is in pg_locks until its transaction
 * ends: an index scan it started holds a lock on its index, whether it read anything or not.
 * Role `api`: no dispatcher, so deliveries move only when the test moves them.
 */

let stepped: SteppedPlatform;
let t: TestPlatform;
let tenant: TestTenant;
let conn: Knex;

beforeAll(async () => {
  // One connection. The cases that read what it opened make its plans first, in a savepoint they
  // roll back: planning opens every partition.
  stepped = await startSteppedPlatform('event-days-opened');
  ({ t, tenant, conn } = stepped);
  // As a database that has kept 30 days: ~40 partitions of events with those made ahead.
  await ensurePartitions(t.platform.db, daysAgo(30), new Date(), 'day');
});
afterAll(() => stepped?.stop());

async function eventPartitions(): Promise<number> {
  const { rows } = await conn.raw(`SELECT count(*)::int AS n FROM pg_inherits WHERE inhparent = 'events'::regclass`);
  return rows[0].n;
}

/** The partitions of events whose indexes this connection's transaction has opened. */
async function eventPartitionsOpened(): Promise<string[]> {
  const { rows } = await conn.raw(`
    SELECT DISTINCT c.relname AS name
      FROM pg_locks l
      JOIN pg_index i ON i.indexrelid = l.relation
      JOIN pg_inherits h ON h.inhrelid = i.indrelid AND h.inhparent = 'events'::regclass
      JOIN pg_class c ON c.oid = i.indrelid
     WHERE l.pid = pg_backend_pid()
     ORDER BY 1`);
  return rows.map((r: { name: string }) => r.name);
}

/**
 * What `step` opened of events, in a transaction rolled back after it. `plan` runs first, in a
 * savepoint rolled back, so that the plans are made and the locks of making them let go: made
 * outside the transaction, they could be made again inside it. They can still be: a burst of schema
 * changes in other test files' databases can overflow PostgreSQL's invalidation queue, which drops
 * every backend's cached plans, and planning opens every partition. So a measurement that opened
 * more than one partition is taken again, up to three times; a join that opens every partition on
 * each run does so every time.
 */
async function partitionsOpenedBy<T>(plan: () => Promise<unknown>, step: () => Promise<T>): Promise<{ result: T; opened: string[] }> {
  let taken: { result: T; opened: string[] } | undefined;
  for (let attempt = 0; attempt < 3 && (!taken || taken.opened.length > 1); attempt++) {
    await conn.raw('BEGIN');
    try {
      await conn.raw('SAVEPOINT planned');
      await plan();
      await conn.raw('ROLLBACK TO SAVEPOINT planned');
      const result = await step();
      taken = { result, opened: await eventPartitionsOpened() };
    } finally {
      await conn.raw('ROLLBACK');
    }
  }
  return taken!;
}

/** The partition holding an event named by its TypeID (stored as the uuid it encodes). */
async function partitionOf(eventId: string): Promise<string> {
  const { rows } = await conn.raw(`SELECT tableoid::regclass::text AS name FROM events WHERE id = ?`, [uuidOf('event', eventId)]);
  return rows[0].name;
}

/** A pending delivery, due at `dueAt`, of an event published `days` ago (a retry, a replay or a backfill of it). */
async function insertOldPending(endpointId: string, days: number, dueAt: Date): Promise<{ eventId: string; deliveryId: string }> {
  const at = daysAgo(days);
  const eventId = idAt('event', at);
  const deliveryId = newId('delivery');
  // Rows store the uuids the tenant's and the event's TypeIDs encode.
  const tenantKey = uuidOf('tenant', tenant.id);
  const eventKey = uuidOf('event', eventId);
  await t.platform.db('events').insert({
    id: eventKey, tenant_id: tenantKey, origin: 'api', type: 'order.created', data: '{"old":true}', created_at: at,
  });
  const now = new Date();
  await t.platform.db('deliveries').insert({
    id: uuidOf('delivery', deliveryId), tenant_id: tenantKey, event_id: eventKey, endpoint_id: uuidOf('endpoint', endpointId), status: 'pending',
    next_attempt_at: dueAt, deadline_at: new Date(now.getTime() + 3_600_000), created_at: at, updated_at: now,
  });
  return { eventId, deliveryId };
}

/** Admits one delivery to a local slot and records its success, which hands the slot on. */
async function cycle(): Promise<{ admitted: ClaimedDelivery; handed?: ClaimedDelivery }> {
  const round = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 1 }, { count: 1, inFlightLeaseMs: leaseMs, mode: 'all' });
  expect(round.claimed).toHaveLength(1);
  const admitted = round.claimed[0]!;
  const [done] = await recordSuccesses(conn, [{ record: successOf(admitted), handOff: true }], limits, leaseMs);
  expect(done!.applied).toBe(true);
  return { admitted, handed: done!.next };
}

describe('admission and hand-offs on a database that keeps 30 days of events', () => {
  it('open only the partition of the day their events were published', async () => {
    expect(await eventPartitions()).toBeGreaterThanOrEqual(30);
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/today', eventTypes: ['order.*'], maxConcurrency: 4 });
    const events = await insertPendingBacklog(t, tenant.id, ep.id, 2);

    const { result, opened } = await partitionsOpenedBy(cycle, cycle);
    expect([result.admitted.event_id, result.handed?.event_id].sort()).toEqual([...events].sort());
    expect(opened).toEqual([await partitionOf(events[0]!)]);
  });

  it('still find an old event beside today\'s, claimed and queued alike', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/mixed', eventTypes: ['order.*'], maxConcurrency: 4 });
    const old = await insertOldPending(ep.id, 10, daysAgo(1));
    const [todayEvent] = await insertPendingBacklog(t, tenant.id, ep.id, 1);

    await conn.raw('BEGIN');
    try {
      // To this process's slots: the claims carry each event's body.
      const local = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 4 }, { count: 10, inFlightLeaseMs: leaseMs, mode: 'all' });
      const byEvent = new Map(local.claimed.filter((c) => c.endpoint.id === ep.id).map((c) => [c.event_id, c]));
      expect([...byEvent.keys()].sort()).toEqual([old.eventId, todayEvent].sort());
      expect(JSON.parse(byEvent.get(old.eventId)!.body)).toMatchObject({ id: old.eventId, data: { old: true } });
      expect(JSON.parse(byEvent.get(todayEvent!)!.body)).toMatchObject({ id: todayEvent });
    } finally {
      await conn.raw('ROLLBACK');
    }

    await conn.raw('BEGIN');
    try {
      // For Redis: queued, with no local slot to give.
      const queued = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 4 });
      expect(queued.queued.filter((q) => q.endpoint_id === ep.id).map((q) => q.id)).toContain(old.deliveryId);
      expect(queued.queued.filter((q) => q.endpoint_id === ep.id)).toHaveLength(2);
    } finally {
      await conn.raw('ROLLBACK');
    }
  });

  it('hand a slot on to an old event\'s delivery', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/handed-old', eventTypes: ['order.*'], maxConcurrency: 1 });
    const [todayEvent] = await insertPendingBacklog(t, tenant.id, ep.id, 1, new Date(Date.now() - 60_000));
    const old = await insertOldPending(ep.id, 20, new Date());

    await conn.raw('BEGIN');
    try {
      // Today's event is due first; its slot goes on to the old one.
      const round = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 1 }, { count: 10, inFlightLeaseMs: leaseMs, mode: 'all' });
      const mine = round.claimed.filter((c) => c.endpoint.id === ep.id);
      expect(mine.map((c) => c.event_id)).toEqual([todayEvent]);
      const [done] = await recordSuccesses(conn, [{ record: successOf(mine[0]!), handOff: true }], limits, leaseMs);
      expect(done!.next?.id).toBe(old.deliveryId);
      expect(JSON.parse(done!.next!.body)).toMatchObject({ id: old.eventId, data: { old: true } });
    } finally {
      await conn.raw('ROLLBACK');
    }
  });

  it('claim a queued delivery from its event\'s partition alone, with or without the event id', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/queued', eventTypes: ['order.*'], maxConcurrency: 4 });
    const events = await insertPendingBacklog(t, tenant.id, ep.id, 2);
    const round = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 4 });
    const queued = round.queued.filter((q) => q.endpoint_id === ep.id);
    expect(queued.map((q) => q.event_id).sort()).toEqual([...events].sort());
    const [withEvent, withoutEvent] = queued as [(typeof queued)[0], (typeof queued)[0]];

    const { result: claimedWith, opened } = await partitionsOpenedBy(
      // Planned as each pooled connection's warm-up plans it: a well-formed event id, so that the
      // claim runs (and is planned) rather than being refused unread.
      async () => expect(await claimDelivery(conn, 'dlv_00000000000000000000000000', leaseMs, 'evt_00000000000000000000000000')).toBeUndefined(),
      // As a job queued by this release carries it.
      () => claimDelivery(conn, withEvent.id, leaseMs, withEvent.event_id),
    );
    expect(claimedWith?.status).toBe('in_flight');
    expect(JSON.parse(claimedWith!.body)).toMatchObject({ id: withEvent.event_id });
    expect(opened).toEqual([await partitionOf(withEvent.event_id)]);
    // A job queued by release 0.6.0 names no event: the claim looks it up.
    const claimed = await claimDelivery(conn, withoutEvent.id, leaseMs);
    expect(claimed?.status).toBe('in_flight');
    expect(claimed?.event_id).toBe(withoutEvent.event_id);
    expect(await claimDelivery(conn, 'dlv_00000000000000000000000000', leaseMs)).toBeUndefined();
  });
});
