import { readFileSync } from 'node:fs';
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { recordSuccesses } from '../../src/delivery/sql/attempts.js';
import { functionsDirectory } from '../../src/infra/function-sources.js';
import {
  createEndpoint, insertPendingBacklog, startSteppedPlatform, steppedLeaseMs as leaseMs, steppedLimits as limits, successOf, type SteppedPlatform,
} from '../helpers/dispatch.js';
import type { TestPlatform, TestTenant } from '../helpers/platform.js';

/**
 * next_due reads in a snapshot newer than the statement that calls it, so it can pick and lock a
 * delivery committed after that statement began. Whatever admission and the hand-off read about
 * their picks afterwards (each delivery's event, the range of event ids) must be read after the
 * pick too, or such a delivery is locked and then left out (db/functions/event_id_range.sql).
 * This test's database gets a next_due that waits a second before its query, and a delivery is
 * committed during that second. Role `api`: no dispatcher, so deliveries move only when the test
 * moves them.
 */

let stepped: SteppedPlatform;
let t: TestPlatform;
let tenant: TestTenant;
let conn: Knex;

beforeAll(async () => {
  stepped = await startSteppedPlatform('pick-snapshot');
  ({ t, tenant, conn } = stepped);
  const slow = readFileSync(`${functionsDirectory}/next_due.sql`, 'utf8').replace(/\nBEGIN\n/, '\nBEGIN\n  PERFORM pg_sleep(1);\n');
  expect(slow).toContain('pg_sleep(1)');
  await t.platform.db.raw(slow);
});
afterAll(() => stepped?.stop());

/** Runs `call`, and while next_due waits inside it, commits one more due delivery to `endpointId`. */
async function withLateDelivery<T>(endpointId: string, call: () => Promise<T>): Promise<{ result: T; late: string }> {
  const running = call();
  await new Promise((resolve) => setTimeout(resolve, 300));
  const [late] = await insertPendingBacklog(t, tenant.id, endpointId, 1, new Date(Date.now() - 30_000));
  return { result: await running, late: late! };
}

describe('a delivery committed while next_due is about to pick', () => {
  it('is claimed by the admission round that picked it', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/admitted', eventTypes: ['order.*'], maxConcurrency: 10 });
    await insertPendingBacklog(t, tenant.id, ep.id, 1, new Date(Date.now() - 60_000));
    const { result, late } = await withLateDelivery(ep.id, () =>
      admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 5 }, { count: 10, inFlightLeaseMs: leaseMs, mode: 'all' }),
    );
    expect(result.claimed.map((c) => c.event_id)).toContain(late);
  });

  it('is handed to the slot whose hand-off picked it', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/handed', eventTypes: ['order.*'], maxConcurrency: 1 });
    await insertPendingBacklog(t, tenant.id, ep.id, 1, new Date(Date.now() - 60_000));
    const round = await admitDue(conn, { queuedLeaseSeconds: 30, circuitFailureThreshold: 3, perEndpointBatch: 1 }, { count: 10, inFlightLeaseMs: leaseMs, mode: 'all' });
    const [first] = round.claimed.filter((c) => c.endpoint.id === ep.id);
    const { result, late } = await withLateDelivery(ep.id, () => recordSuccesses(conn, [{ record: successOf(first!), handOff: true }], limits, leaseMs));
    expect(result[0]?.next?.event_id).toBe(late);
  });
});
