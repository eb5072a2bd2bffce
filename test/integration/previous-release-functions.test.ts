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
  it('admit (with a row waiting for a slot), record a failure and a success each handing on, hand off: same effects, same columns', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/old', eventTypes: ['old.*'], maxConcurrency: 3 });
    await publishMany(tenant, 5, 5, 'old.created');

    // Everything local (Redis failing) with one free slot: one delivery in flight, and one row
    // without a delivery saying the endpoint has work waiting for a slot.
    const round = (await call('SELECT * FROM admit_due(3, 500, 30, 1, 30000, true)')).filter((r) => r.ep_id === ep.id);
    expect(round.map((r) => [r.local, r.id === null])).toEqual([[true, false], [false, true]]);
    for (const row of round) expect(Object.keys(row)).toEqual(['local', ...claimedColumns, 'skipped']);
    const [first] = round;
    expect(first).toMatchObject({ status: 'in_flight', attempt_count: 1 });
    const second = (await call('SELECT * FROM admit_due(3, 500, 30, 1, 30000, true)')).find((r) => r.ep_id === ep.id && r.id !== null);
    expect(second).toMatchObject({ local: true, status: 'in_flight' });
    expect(await statusesOf(ep.id)).toEqual({ in_flight: 2, pending: 3 });

    // A failure (retry later) whose slot goes on to the endpoint's next due delivery.
    const recorded = await call(
      `SELECT * FROM record_attempt(:id, 1, 'pending', now() + interval '1 hour', NULL, 500, 'HTTP 500', 'att_old_1', :tenantId,
                                    'initial', now(), 5, 'retry', NULL, NULL, NULL, :endpointId, true, 3, 30, 30000)`,
      { id: first.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(recorded).toHaveLength(1);
    expect(Object.keys(recorded[0])).toEqual(['applied', ...claimedColumns]);
    expect(recorded[0]).toMatchObject({ applied: true, status: 'in_flight', ep_id: ep.id, attempt_count: 1 });
    const seen = new Set([first.id, second.id]);
    expect(seen.has(recorded[0].id)).toBe(false);
    seen.add(recorded[0].id);

    // A success whose slot goes on too: the first row says it was applied, the next is the handed delivery.
    const successes = await call(
      `SELECT * FROM record_successes(ARRAY[:id]::text[], ARRAY[1], ARRAY['att_old_2'], ARRAY[:tenantId]::text[], ARRAY['initial'],
                                      ARRAY[now()], ARRAY[4], ARRAY[200], ARRAY[NULL]::text[], ARRAY[:endpointId]::text[], ARRAY[true], 3, 30000)`,
      { id: second.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(successes).toHaveLength(2);
    for (const row of successes) expect(Object.keys(row)).toEqual(['applied', ...claimedColumns]);
    expect(successes[0]).toMatchObject({ applied: [1], id: null });
    expect(successes[1]).toMatchObject({ applied: null, status: 'in_flight', ep_id: ep.id });
    expect(seen.has(successes[1].id)).toBe(false);
    seen.add(successes[1].id);

    // The third slot takes the last pending delivery.
    const handed = await call('SELECT * FROM hand_off(ARRAY[:endpointId]::text[], ARRAY[1], 3, 30000)', { endpointId: ep.id });
    expect(handed).toHaveLength(1);
    expect(Object.keys(handed[0])).toEqual(claimedColumns);
    expect(handed[0]).toMatchObject({ status: 'in_flight', ep_id: ep.id });
    expect(seen.has(handed[0].id)).toBe(false);

    expect(await statusesOf(ep.id)).toEqual({ in_flight: 3, pending: 1, succeeded: 1 });
    const attempts = await call('SELECT outcome FROM attempts WHERE delivery_id IN (:a, :b) ORDER BY outcome', { a: first.id, b: second.id });
    expect(attempts.map((r) => r.outcome)).toEqual(['retry', 'success']);
  });
});
