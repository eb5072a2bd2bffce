import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordSuccesses, type AttemptRecord, type SuccessItem } from '../../src/delivery/sql/attempts.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { attemptsListed } from '../helpers/database.js';

/**
 * Successes of several slots recorded in one statement, each with its hand-off. Role `api`: no
 * worker, so the deliveries only move when the test moves them.
 */

let t: TestPlatform;
let tenant: TestTenant;
const lease = 30_000;
const health = { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 };

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('group-commit-dispatch');
});
afterAll(async () => {
  await t?.stop();
});

/** Takes the endpoint's oldest `n` pending deliveries in flight, as a claim would (ids as the API gives them). */
async function takeInFlight(endpointId: string, n: number): Promise<Array<{ id: string; tenant_id: string; lease_token: number }>> {
  const { rows } = await t.platform.db.raw(
    `UPDATE deliveries SET status = 'in_flight', attempt_count = attempt_count + 1, lease_until = now() + interval '30 seconds'
      WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = ? AND status = 'pending' ORDER BY next_attempt_at, id LIMIT ?)
     RETURNING id, tenant_id, lease_token(lease_until) AS lease_token`,
    [uuidOf('endpoint', endpointId), n],
  );
  return rows.map((r: { id: string; tenant_id: string; lease_token: number }) => ({ ...r, id: idOfUuid('delivery', r.id) }));
}

function success(d: { id: string; tenant_id: string; lease_token: number }, endpointId: string, attemptNumber = 1): AttemptRecord {
  return {
    deliveryId: d.id, endpointId, attemptNumber, leaseToken: d.lease_token, trigger: 'initial', startedAt: new Date(), durationMs: 3,
    statusCode: 200, outcome: 'success', errorClass: null, errorMessage: null, responseExcerpt: 'ok', next: { status: 'succeeded' }, endpointFailure: false,
  };
}

async function statusOf(endpointId: string): Promise<Record<string, number>> {
  const { rows } = await t.platform.db.raw<{ rows: Array<{ status: string; n: number }> }>(
    'SELECT s.status, count(*)::int AS n FROM deliveries d CROSS JOIN LATERAL delivery_state(d.id, d.status, d.attempt_count) s WHERE d.endpoint_id = ? GROUP BY s.status',
    [uuidOf('endpoint', endpointId)],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe('recording successes together', () => {
  it('three slots of one endpoint and one of another: each recorded, each handed a different next delivery', async () => {
    const a = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/a', eventTypes: ['a.*'] });
    const b = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/b', eventTypes: ['b.*'] });
    await publishMany(tenant, 8, 1, 'a.created');
    await publishMany(tenant, 2, 1, 'b.created');
    const inA = await takeInFlight(a.id, 3);
    const [inB] = await takeInFlight(b.id, 1);
    const late = { ...success(inA[2]!, a.id, 7) }; // a result whose lease was taken back: wrong attempt number

    const items: SuccessItem[] = [
      { record: success(inA[0]!, a.id), handOff: true },
      { record: success(inB!, b.id), handOff: true },
      { record: success(inA[1]!, a.id), handOff: true },
      { record: late, handOff: true },
    ];
    const results = await recordSuccesses(t.platform.db, items, health, lease);

    expect(results.map((r) => r.applied)).toEqual([true, true, true, false]);
    const nextA = [results[0]!.next!, results[2]!.next!];
    expect(nextA.map((n) => n.status)).toEqual(['in_flight', 'in_flight']);
    expect(new Set(nextA.map((n) => n.id)).size).toBe(2);
    for (const n of nextA) expect(inA.map((d) => d.id)).not.toContain(n.id);
    expect(results[1]!.next).toMatchObject({ status: 'in_flight', attempt_count: 1, endpoint: { id: b.id } });
    expect(results[3]!.next).toBeUndefined();

    // a: 2 succeeded, 1 still in flight (the late one) + 2 handed on, 3 pending. b: 1 succeeded, 1 handed on.
    expect(await statusOf(a.id)).toEqual({ succeeded: 2, in_flight: 3, pending: 3 });
    expect(await statusOf(b.id)).toEqual({ succeeded: 1, in_flight: 1 });
    const attempts: Array<{ outcome: string; status_code: number }> = await attemptsListed(t.platform.db).whereIn('delivery_id', [...inA.map((d) => d.id), inB!.id]).select('delivery_id', 'outcome', 'status_code');
    expect(attempts).toHaveLength(3);
    expect(attempts.every((x) => x.outcome === 'success' && x.status_code === 200)).toBe(true);
  });

  it('hands on no more than is due, and nothing for a slot that did not ask', async () => {
    const c = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/c', eventTypes: ['c.*'] });
    await publishMany(tenant, 4, 1, 'c.created');
    const inC = await takeInFlight(c.id, 3); // one left pending
    const results = await recordSuccesses(
      t.platform.db,
      inC.map((d, i) => ({ record: success(d, c.id), handOff: i !== 1 })),
      health,
      lease,
    );
    expect(results.map((r) => r.applied)).toEqual([true, true, true]);
    expect(results[1]!.next).toBeUndefined();
    expect(results.filter((r) => r.next)).toHaveLength(1); // two asked, one was due
    expect(await statusOf(c.id)).toEqual({ succeeded: 3, in_flight: 1 });
  });
});
