import type { Knex } from 'knex';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { claimDelivery } from '../../src/delivery/sql/attempts.js';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { daysAgo, idAt } from '../helpers/backdate.js';
import { createEndpoint, insertPendingBacklog, startSteppedPlatform, steppedLeaseMs as leaseMs, type SteppedPlatform } from '../helpers/dispatch.js';
import type { TestPlatform, TestTenant } from '../helpers/platform.js';
import { reportPlans } from '../helpers/plans.js';

/**
 * A worker claims each delivery Redis gives it (db/functions/claim_delivery.sql). On a database
 * that keeps 30 days, PostgreSQL planned that claim again on every call when it was a prepared
 * statement, and a plan kept for the connection must not read a day by a sequential scan because
 * that day was analyzed before it had rows. The plans are read as auto_explain reports them to the
 * session: a plan made for the values of one call shows them, one made once shows parameters.
 * Role `api`: no dispatcher, so deliveries move only when the test moves them.
 */

let stepped: SteppedPlatform;
let t: TestPlatform;
let tenant: TestTenant;
let conn: Knex;
const plans: string[] = [];

beforeAll(async () => {
  stepped = await startSteppedPlatform('claim-plan');
  ({ t, tenant, conn } = stepped);
});
afterAll(() => stepped?.stop());

const reporting = new WeakSet<pg.PoolClient>();

/**
 * `conn` has one connection, which the claims run on: it is made to report their plans. Asked
 * right before the claims, since the pool closes a connection left idle and opens another.
 */
async function reportClaimPlans(): Promise<void> {
  const client = (await conn.client.acquireConnection()) as pg.PoolClient;
  try {
    if (reporting.has(client)) return;
    await reportPlans(client, plans);
    reporting.add(client);
  } finally {
    await conn.client.releaseConnection(client);
  }
}

/** Queues `count` deliveries of events published now, as admission does for Redis. */
async function queued(endpointId: string, count: number): Promise<Array<{ id: string; event_id: string }>> {
  await insertPendingBacklog(t, tenant.id, endpointId, count);
  const round = await admitDue(t.platform.db, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: count });
  return round.queued.filter((q) => q.endpoint_id === endpointId);
}

/** The plans of the claims' updates reported since `from`. */
function claimPlans(from: number): string[] {
  return plans.slice(from).filter((p) => p.includes('Update on deliveries'));
}

describe('the claim of a queued delivery', () => {
  it('is planned once per connection, not on every call', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/claims', eventTypes: ['order.*'], maxConcurrency: 20 });
    // More claims than the five PostgreSQL plans for their values before it weighs a plan for any.
    const deliveries = await queued(ep.id, 8);
    expect(deliveries).toHaveLength(8);
    await reportClaimPlans();
    const from = plans.length;
    for (const d of deliveries) {
      expect((await claimDelivery(conn, d.id, leaseMs, d.event_id))?.status).toBe('in_flight');
    }
    const claims = claimPlans(from);
    expect(claims).toHaveLength(8);
    for (const [i, plan] of claims.entries()) {
      // One plan for any delivery: it names neither this call's delivery nor its event.
      expect(plan).not.toContain(uuidOf('delivery', deliveries[i]!.id));
      expect(plan).not.toContain(uuidOf('event', deliveries[i]!.event_id));
      // Its days of events pruned as it runs, to the event's own.
      expect(plan).toMatch(/Subplans Removed: [1-9]/);
    }
  });

  it('reads a day analyzed before it had rows by its key', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/analyzed-empty', eventTypes: ['order.*'], maxConcurrency: 20 });
    // `vacuumdb --analyze` (after an upgrade, say) records the days made ahead as empty. Then the day comes.
    const day = daysAgo(-2);
    await t.platform.db.raw('ANALYZE events');
    const eventId = idAt('event', day);
    const deliveryId = newId('delivery');
    // Rows hold the tenant and the event as the uuids their TypeIDs encode.
    const tenantKey = uuidOf('tenant', tenant.id);
    const eventKey = uuidOf('event', eventId);
    await t.platform.db('events').insert({ id: eventKey, tenant_id: tenantKey, origin: 'api', type: 'order.created', data: '{"n":1}', created_at: new Date() });
    await t.platform.db('deliveries').insert({
      id: uuidOf('delivery', deliveryId), tenant_id: tenantKey, event_id: eventKey, endpoint_id: uuidOf('endpoint', ep.id), status: 'pending',
      next_attempt_at: new Date(), deadline_at: new Date(Date.now() + 3_600_000),
    });
    const round = await admitDue(t.platform.db, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 1 });
    expect(round.queued.map((q) => q.id)).toContain(deliveryId);
    const { rows } = await t.platform.db.raw(`SELECT c.reltuples, e.tableoid::regclass::text AS day
                                                FROM events e JOIN pg_class c ON c.oid = e.tableoid WHERE e.id = ?`, [eventKey]);
    expect(rows[0].reltuples).toBe(0);

    await reportClaimPlans();
    const from = plans.length;
    const claimed = await claimDelivery(conn, deliveryId, leaseMs, eventId);
    expect(claimed?.status).toBe('in_flight');
    expect(JSON.parse(claimed!.body)).toMatchObject({ id: eventId, data: { n: 1 } });
    const [plan] = claimPlans(from);
    expect(plan).toContain(`${rows[0].day}_pkey`);
    expect(plan).not.toContain('Seq Scan');
  });
});
