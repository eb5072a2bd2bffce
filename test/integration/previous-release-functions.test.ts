import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countWhereIn } from '../helpers/backdate.js';
import { attemptsListed } from '../helpers/database.js';
import { createEndpoint, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * The recording functions keep the tenant arguments release 0.2.0 passed and nothing reads since
 * 0.3.0 (which passes NULL), until a signature without them replaces these functions
 * (docs/operations/functions.md). A call that passes a tenant must keep moving deliveries as
 * before, and the attempts it records carry no tenant of their own. Role `api`: no dispatcher, so
 * deliveries only move when the test moves them.
 */

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

describe("calls with the tenant arguments of release 0.2.0", () => {
  it('record a failure and a success with their tenant arguments, each handing on: same effects, no tenant stored', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/previous', eventTypes: ['previous.*'], maxConcurrency: 2 });
    await publishMany(tenant, 4, 4, 'previous.created');

    const admitted = (await call('SELECT * FROM admit_due_v2(3, 500, 30, 2, 30000, true)')).filter((r) => r.ep_id === ep.id && r.id !== null);
    expect(admitted.map((r) => r.status)).toEqual(['in_flight', 'in_flight']);
    const [first, second] = admitted;
    const seen = new Set([first.id, second.id]);

    // A failure (retry later) whose slot goes on to the endpoint's next due delivery.
    const recorded = await call(
      `SELECT * FROM record_attempt_v2(:id, 1, 'pending', now() + interval '1 hour', NULL, 500, 'HTTP 500', 'att_previous_1', :tenantId,
                                       'initial', now(), 5, 'retry', NULL, NULL, NULL, :endpointId, true, 3, 30, 30000)`,
      { id: first.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ applied: true, status: 'in_flight', ep_id: ep.id, attempt_count: 1 });
    expect(seen.has(recorded[0].id)).toBe(false);
    seen.add(recorded[0].id);

    // A success whose slot goes on too: the first row says it was applied, the next is the handed delivery.
    const successes = await call(
      `SELECT * FROM record_successes_v2(ARRAY[:id]::text[], ARRAY[1], ARRAY['att_previous_2'], ARRAY[:tenantId]::text[], ARRAY['initial'],
                                         ARRAY[now()], ARRAY[4], ARRAY[200], ARRAY[NULL]::text[], ARRAY[:endpointId]::text[], ARRAY[true], 3, 30000)`,
      { id: second.id, tenantId: tenant.id, endpointId: ep.id },
    );
    expect(successes).toHaveLength(2);
    expect(successes[0]).toMatchObject({ applied: [1], id: null });
    expect(successes[1]).toMatchObject({ applied: null, status: 'in_flight', ep_id: ep.id });
    expect(seen.has(successes[1].id)).toBe(false);

    expect(await statusesOf(ep.id)).toEqual({ in_flight: 2, pending: 1, succeeded: 1 });
    // The first try that succeeded is stored in its delivery, under the id its delivery gives it
    // (attempt_stored_in_delivery): the previous release's processes list it through delivery_attempts.
    const attempts = await attemptsListed(t.platform.db).whereIn('delivery_id', [first.id, second.id]).orderBy('outcome').select('id', 'outcome', 'tenant_id');
    expect(attempts).toEqual([
      { id: 'att_previous_1', outcome: 'retry', tenant_id: null },
      { id: `att_${second.id.slice('dlv_'.length)}`, outcome: 'success', tenant_id: null },
    ]);
    expect(await countWhereIn(t.platform.db, 'attempts', 'delivery_id', [second.id])).toBe(0);
  });
});
