import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * During a rolling deploy, processes of release 0.1.0 still call admit_due, hand_off,
 * record_attempt and record_successes by their old signatures, while this release calls the `_v2`
 * functions that also return trace contexts (docs/operations/functions.md). The old ones must keep
 * moving deliveries as they did and answer with exactly their old columns. Role `api`: no
 * dispatcher, so deliveries only move when the test moves them.
 */

const claimedColumns = [
  'id', 'tenant_id', 'status', 'attempt_count', 'attempt_base', 'replayed_at', 'next_trigger', 'deadline_at', 'succeeded_at',
  'event_id', 'event_type', 'event_created_at', 'body', 'ep_id', 'url', 'ep_status', 'retry_policy', 'secret_enc',
  'previous_secret_enc', 'previous_secret_expires_at', 'deleted_at',
];

let t: TestPlatform;
let tenant: TestTenant;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('previous-release-functions');
});
afterAll(async () => {
  await t?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function call(sql: string, bindings: Record<string, unknown> = {}): Promise<any[]> {
  const { rows } = await t.platform.db.raw(sql, bindings);
  return rows;
}

async function statusesOf(endpointId: string): Promise<Record<string, number>> {
  const rows = await call('SELECT status, count(*)::int AS n FROM deliveries WHERE endpoint_id = :endpointId GROUP BY status', { endpointId });
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

describe("release 0.1.0's signatures", () => {
  it('admit, record a failure with hand-off, record a success, hand off: same effects, same columns', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/old', eventTypes: ['old.*'], maxConcurrency: 2 });
    await publishMany(tenant, 4, 4, 'old.created');

    // Everything local (Redis failing): both of the endpoint's slots get a delivery in flight.
    const admitted = (await call('SELECT * FROM admit_due(3, 500, 30, 4, 30000, true)')).filter((r) => r.ep_id === ep.id);
    expect(admitted).toHaveLength(2);
    expect(Object.keys(admitted[0])).toEqual(['local', ...claimedColumns, 'skipped']);
    expect(admitted.map((r) => [r.local, r.status, r.attempt_count])).toEqual([[true, 'in_flight', 1], [true, 'in_flight', 1]]);
    expect(await statusesOf(ep.id)).toEqual({ in_flight: 2, pending: 2 });

    // A failure (retry later) whose slot goes on to the endpoint's next due delivery.
    const [first, second] = admitted;
    const recorded = await call(
      `SELECT * FROM record_attempt(:id, 1, 'pending', now() + interval '1 hour', NULL, 500, 'HTTP 500', 'att_old_1', :tenantId,
                                    'initial', now(), 5, 'retry', NULL, NULL, NULL, :endpointId, true, 3, 30, 30000)`,
      { id: first.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(recorded).toHaveLength(1);
    expect(Object.keys(recorded[0])).toEqual(['applied', ...claimedColumns]);
    expect(recorded[0]).toMatchObject({ applied: true, status: 'in_flight', ep_id: ep.id, attempt_count: 1 });
    const handedByRecord = recorded[0].id as string;
    expect([first.id, second.id]).not.toContain(handedByRecord);

    // A success, without hand-off: the first row says it was applied, and nothing is handed.
    const successes = await call(
      `SELECT * FROM record_successes(ARRAY[:id]::text[], ARRAY[1], ARRAY['att_old_2'], ARRAY[:tenantId]::text[], ARRAY['initial'],
                                      ARRAY[now()], ARRAY[4], ARRAY[200], ARRAY[NULL]::text[], ARRAY[:endpointId]::text[], ARRAY[false], 3, 30000)`,
      { id: second.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(successes).toHaveLength(1);
    expect(Object.keys(successes[0])).toEqual(['applied', ...claimedColumns]);
    expect(successes[0].applied).toEqual([1]);

    // The slot the success freed takes the last pending delivery.
    const handed = await call('SELECT * FROM hand_off(ARRAY[:endpointId]::text[], ARRAY[1], 3, 30000)', { endpointId: ep.id });
    expect(handed).toHaveLength(1);
    expect(Object.keys(handed[0])).toEqual(claimedColumns);
    expect(handed[0]).toMatchObject({ status: 'in_flight', ep_id: ep.id });
    expect([first.id, second.id, handedByRecord]).not.toContain(handed[0].id);

    expect(await statusesOf(ep.id)).toEqual({ in_flight: 2, pending: 1, succeeded: 1 });
    const attempts = await call('SELECT outcome FROM attempts WHERE delivery_id IN (:a, :b) ORDER BY outcome', { a: first.id, b: second.id });
    expect(attempts.map((r) => r.outcome)).toEqual(['retry', 'success']);
  });
});
