// A claim's result is recorded under the claim's token (db/functions/claim_held.sql). Admission and
// success records commit without waiting for their WAL flush, so a crash of PostgreSQL can lose a
// claim after its worker sent the request; the delivery is then claimed again under the same
// attempt number. The test plays both: it undoes a claim as the crash would, claims again, and
// records the lost claim's late answer. Role `api`: no worker moves deliveries but the test.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClaimedDelivery } from '../../src/delivery/index.js';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { claimDelivery, recordAttempt, recordEgressFailure, recordSuccesses, type AttemptRecord } from '../../src/delivery/sql/attempts.js';
import { uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, deliveryOfEvent, getDelivery, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

const limits = { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 };
const admission = { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 10 };

let t: TestPlatform;
let tenant: TestTenant;
beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('claim-token');
});
afterAll(async () => {
  await t?.stop();
});

/**
 * The delivery back as it was before its claim: what PostgreSQL recovers when the claim's commit is
 * lost. A slot's claim is written to the delivery's queue row only (admit_due_v4).
 */
async function loseClaim(id: string): Promise<void> {
  const undone = await t.platform.db('delivery_queue').where({ delivery_id: uuidOf('delivery', id), status: 'in_flight' }).update({
    status: 'pending',
    attempt_count: null,
    claimed_at: null,
    lease_until: null,
  });
  expect(undone).toBe(1);
}

function answer(c: ClaimedDelivery, statusCode: number, durationMs: number): AttemptRecord {
  const ok = statusCode < 300;
  return {
    deliveryId: c.id, endpointId: c.endpoint.id, attemptNumber: c.attempt_count, leaseToken: c.lease_token, trigger: c.next_trigger,
    startedAt: new Date(), durationMs, statusCode, outcome: ok ? 'success' : 'terminal', errorClass: ok ? null : `http_${statusCode}`,
    errorMessage: null, responseExcerpt: null, next: ok ? { status: 'succeeded' } : { status: 'dead', reason: 'terminal' }, endpointFailure: false,
  };
}

describe('a claim lost in a crash of PostgreSQL', () => {
  let endpointId: string;
  let first: ClaimedDelivery;
  let second: ClaimedDelivery;

  beforeAll(async () => {
    endpointId = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/claim-token' })).id;
    const eventId = await publish(tenant);
    const { id } = await eventually(() => deliveryOfEvent(tenant, eventId), 'the delivery');
    // Claimed by admission for a slot of this process, then lost.
    first = (await admitDue(t.platform.db, admission, { count: 1, inFlightLeaseMs: 30_000, mode: 'all' })).claimed.find((c) => c.id === id)!;
    expect(first).toMatchObject({ id, status: 'in_flight', attempt_count: 1 });
    await loseClaim(id);
    // Claimed again, through Redis this time: queued by admission, then claimed by a job.
    const round = await admitDue(t.platform.db, admission, { count: 0, inFlightLeaseMs: 30_000, mode: 'share' });
    expect(round.queued.map((d) => d.id)).toContain(id);
    second = (await claimDelivery(t.platform.db, id, 30_000))!;
    expect(second).toMatchObject({ id, status: 'in_flight', attempt_count: 1 });
    expect(second.lease_token).not.toBe(first.lease_token);
  });

  it("does not take the lost claim's late answer for the new claim's: not a failure, a success or an egress failure", async () => {
    expect(await recordAttempt(t.platform.db, answer(first, 400, 11), limits)).toEqual({ applied: false, next: undefined });
    expect(await recordSuccesses(t.platform.db, [{ record: answer(first, 200, 12), handOff: false }], limits, 30_000)).toEqual([{ applied: false }]);
    const egress = { deliveryId: first.id, attemptNumber: first.attempt_count, leaseToken: first.lease_token, nextAt: new Date(), lastError: 'proxy down' };
    expect(await recordEgressFailure(t.platform.db, egress)).toBe(false);
    expect(await t.platform.db('deliveries').where({ id: uuidOf('delivery', first.id) }).first('status', 'attempt_count')).toEqual({ status: 'in_flight', attempt_count: 1 });
  });

  it("records the new claim's own answer, as the one attempt made under that number", async () => {
    expect(await recordSuccesses(t.platform.db, [{ record: answer(second, 200, 34), handOff: false }], limits, 30_000)).toEqual([{ applied: true, next: undefined }]);
    const delivery = await getDelivery(tenant, second.id);
    expect(delivery.status).toBe('succeeded');
    expect(delivery.attempts).toEqual([expect.objectContaining({ attemptNumber: 1, statusCode: 200, durationMs: 34, outcome: 'success' })]);
  });
});

describe('a delivery handed on by a record', () => {
  it('carries its own claim token, which its result is recorded under and no other is', async () => {
    const endpointId = (await createEndpoint(tenant, { url: 'http://127.0.0.1:9/handed', maxConcurrency: 1 })).id;
    for (let i = 0; i < 2; i++) await publish(tenant);
    await eventually(async () => (await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', endpointId) }).count({ n: '*' }))[0]!.n === 2, 'both deliveries');
    const first = (await admitDue(t.platform.db, admission, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' })).claimed.find((c) => c.endpoint.id === endpointId)!;
    const [recorded] = await recordSuccesses(t.platform.db, [{ record: answer(first, 200, 5), handOff: true }], limits, 30_000);
    const handed = recorded!.next!;
    expect(handed).toMatchObject({ status: 'in_flight', attempt_count: 1, endpoint: { id: endpointId } });
    expect(handed.lease_token).toEqual(expect.any(Number));

    const forged = { ...answer(handed, 200, 6), leaseToken: handed.lease_token + 1 };
    expect(await recordSuccesses(t.platform.db, [{ record: forged, handOff: false }], limits, 30_000)).toEqual([{ applied: false }]);
    expect(await recordAttempt(t.platform.db, answer(handed, 200, 7), limits)).toEqual({ applied: true, next: undefined });
    expect(await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', endpointId) }).pluck('status')).toEqual(['succeeded', 'succeeded']);
  });
});
