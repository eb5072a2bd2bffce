import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAttempt, type AttemptRecord } from '../../src/delivery/sql/attempts.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * A failure hands its slot on like a success does, so a flaky endpoint's retries cost no more than
 * fresh work: no trip back through admission and Redis. Role `api`: no worker, so deliveries only
 * move when the test moves them.
 */

let t: TestPlatform;
let tenant: TestTenant;
const lease = 30_000;
const health = { circuitFailureThreshold: 3, circuitCooldownSeconds: 30 };

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('hand-off');
});
afterAll(async () => {
  await t?.stop();
});

type InFlight = { id: string; tenant_id: string; order_key: string | null; lease_token: number };

/** Takes the endpoint's oldest `n` pending deliveries in flight, as a claim would (ids as the API gives them). */
async function takeInFlight(endpointId: string, n: number): Promise<InFlight[]> {
  const { rows } = await t.platform.db.raw(
    `UPDATE deliveries SET status = 'in_flight', attempt_count = attempt_count + 1, lease_until = now() + interval '30 seconds'
      WHERE id IN (SELECT id FROM deliveries WHERE endpoint_id = ? AND status = 'pending' ORDER BY next_attempt_at, id LIMIT ?)
     RETURNING id, tenant_id, order_key, lease_token(lease_until) AS lease_token`,
    [uuidOf('endpoint', endpointId), n],
  );
  return rows.map((r: InFlight) => ({ ...r, id: idOfUuid('delivery', r.id) }));
}

function failure(d: InFlight, endpointId: string, extra: Partial<AttemptRecord> = {}): AttemptRecord {
  return {
    deliveryId: d.id, endpointId, attemptNumber: 1, leaseToken: d.lease_token, trigger: 'initial', startedAt: new Date(), durationMs: 3,
    statusCode: 500, outcome: 'retry', errorClass: 'http_500', errorMessage: null, responseExcerpt: null,
    next: { status: 'pending', at: new Date(Date.now() + 60_000) }, endpointFailure: true, ...extra,
  };
}

async function rowOf(id: string) {
  return t.platform.db('deliveries').where({ id: uuidOf('delivery', id) }).first('status', 'attempt_count', 'next_attempt_at');
}

describe('a failure hands its slot on', () => {
  it('a retry hands the slot to the next due delivery; the failed one waits for its backoff', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/a', eventTypes: ['a.*'] });
    await publishMany(tenant, 3, 1, 'a.created');
    const [first] = await takeInFlight(ep.id, 1);
    const r = await recordAttempt(t.platform.db, failure(first!, ep.id), health, lease);
    expect(r.applied).toBe(true);
    expect(r.next).toMatchObject({ status: 'in_flight', attempt_count: 1, endpoint: { id: ep.id } });
    expect(r.next!.id).not.toBe(first!.id);
    expect(await rowOf(first!.id)).toMatchObject({ status: 'pending', attempt_count: 1 });
    expect((await rowOf(first!.id)).next_attempt_at.getTime()).toBeGreaterThan(Date.now() + 30_000);
    const endpoint = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first('consecutive_failures', 'circuit_open_until');
    expect(endpoint).toEqual({ consecutive_failures: 1, circuit_open_until: null });
  });

  it('the failure that opens the circuit ends the chain', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/b', eventTypes: ['b.*'] });
    await publishMany(tenant, 5, 1, 'b.created');
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).update({ consecutive_failures: 2 }); // one short of the threshold
    const [first] = await takeInFlight(ep.id, 1);
    const r = await recordAttempt(t.platform.db, failure(first!, ep.id), health, lease);
    expect(r.applied).toBe(true);
    expect(r.next).toBeUndefined();
    const endpoint = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first('consecutive_failures', 'circuit_open_until');
    expect(endpoint.consecutive_failures).toBe(3);
    expect(endpoint.circuit_open_until.getTime()).toBeGreaterThan(Date.now());
  });

  it('a 410 that disables the endpoint hands nothing on', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/c', eventTypes: ['c.*'] });
    await publishMany(tenant, 3, 1, 'c.created');
    const [first] = await takeInFlight(ep.id, 1);
    const gone = failure(first!, ep.id, {
      statusCode: 410, outcome: 'terminal', errorClass: 'http_410', next: { status: 'dead', reason: 'terminal' }, endpointFailure: false, disableEndpoint: 'endpoint answered 410 Gone',
    });
    // As the worker does it: the 410 disables the endpoint (audited once), then the attempt is recorded.
    const disabled = { id: ep.id, tenantId: tenant.id, reason: gone.disableEndpoint! };
    expect(await t.platform.lifecycle.disableGoneEndpoint(disabled)).toBe(true);
    expect(await t.platform.lifecycle.disableGoneEndpoint(disabled)).toBe(false);
    const r = await recordAttempt(t.platform.db, gone, health, lease);
    expect(r.applied).toBe(true);
    expect(r.next).toBeUndefined();
    expect(await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first('status', 'disabled_reason')).toEqual({ status: 'disabled', disabled_reason: 'endpoint answered 410 Gone' });
    expect(await t.platform.db('audit_log').where({ target_id: ep.id, action: 'endpoint.auto_disabled' }).count({ n: '*' })).toEqual([{ n: 1 }]);
  });

  it('per-message ordering: a retry keeps its line, so the slot goes to another message, never to the same one', async () => {
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/o', eventTypes: ['o.*'], ordering: 'per-message' });
    for (const [message, i] of [['m1', 0], ['m1', 1], ['m2', 0]] as const) {
      const res = await tenant.call('POST', '/v1/events', { body: { type: 'o.changed', messageId: message, data: { i } }, headers: { 'idempotency-key': `o-${message}-${i}` } });
      expect(res.status, res.text).toBe(202);
    }
    const [head] = await takeInFlight(ep.id, 1); // m1's first
    const retried = await recordAttempt(t.platform.db, failure(head!, ep.id), health, lease);
    expect(retried.next).toBeDefined();
    const handed = await t.platform.db('deliveries').where({ id: uuidOf('delivery', retried.next!.id) }).first('order_key');
    expect(handed.order_key).not.toBe(head!.order_key);

    // Dead releases the line: m1's second event may go next.
    const { rows } = await t.platform.db.raw(`SELECT id FROM deliveries WHERE endpoint_id = ? AND order_key = ? AND status = 'pending' ORDER BY order_seq`, [uuidOf('endpoint', ep.id), head!.order_key]);
    await t.platform.db('deliveries').where({ id: uuidOf('delivery', retried.next!.id) }).update({ status: 'succeeded', lease_until: null });
    const again = await t.platform.db.raw(
      `UPDATE deliveries SET status = 'in_flight', attempt_count = 2, next_attempt_at = now(), lease_until = now() + interval '30 seconds'
        WHERE id = ? RETURNING lease_token(lease_until) AS lease_token`,
      [uuidOf('delivery', head!.id)],
    );
    const second = { attemptNumber: 2, leaseToken: again.rows[0].lease_token, outcome: 'terminal', next: { status: 'dead', reason: 'max_attempts' } } as const;
    const dead = await recordAttempt(t.platform.db, failure(head!, ep.id, second), health, lease);
    expect(dead.next?.id).toBe(idOfUuid('delivery', rows[1]!.id));
  });
});
