import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { recordAttempt, recordSuccesses } from '../../src/delivery/sql/attempts.js';
import type { ClaimedDelivery } from '../../src/delivery/index.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { inspect } from '../helpers/invariants.js';
import { TRANSITION_LOG } from '../helpers/transition-log.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The invariant checker holds every delivery's status changes to TRANSITIONS: a change no entry
 * allows is reported, whoever made it. Role `api`, so only this test moves the delivery.
 */

let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
});
afterAll(async () => {
  await t?.stop();
});

const forbidden = async (tenantId: string) =>
  (await inspect({ db: t.platform.db, receivers: [], tenantIds: [tenantId] })).violations.filter((v) => v.kind === 'forbidden_transition' || v.kind === 'transitions_not_recorded');

describe('the invariant checker and TRANSITIONS', () => {
  it('accepts allowed changes and reports succeeded → in_flight, which no transition allows', async () => {
    const tenant = await t.createTenant('transitions');
    await createEndpoint(tenant, { url: 'http://127.0.0.1:9/x', eventTypes: ['tr.*'] });
    const eventId = await publish(tenant, 'tr.created', {});
    const db = t.platform.db;
    // The delivery row names its event by the uuid the TypeID encodes.
    const { id } = await db('deliveries').where({ event_id: uuidOf('event', eventId) }).first('id');
    // created → pending (fan-out), pending → in_flight (admission to a local slot), in_flight → succeeded.
    await db('deliveries').where({ id }).update({ status: 'in_flight', lease_until: db.raw(`now() + interval '1 minute'`) });
    await db('deliveries').where({ id }).update({ status: 'succeeded', lease_until: null, succeeded_at: db.fn.now() });
    expect(await forbidden(tenant.id)).toEqual([]);

    await db('deliveries').where({ id }).update({ status: 'in_flight', lease_until: db.raw(`now() + interval '1 minute'`), succeeded_at: null });
    const violations = await forbidden(tenant.id);
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({ kind: 'forbidden_transition', deliveryId: idOfUuid('delivery', id) });
    expect(violations[0]!.message).toContain('succeeded → in_flight');
  });

  it("records a slot's claim, kept in the queue row only, as the status change a reader sees", async () => {
    const tenant = await t.createTenant('queue-claims');
    const endpoint = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/q', eventTypes: ['qc.*'] });
    const eventId = await publish(tenant, 'qc.created', {});
    const db = t.platform.db;
    const { id } = await db('deliveries').where({ event_id: uuidOf('event', eventId) }).first('id');
    const limits = { circuitFailureThreshold: 5, circuitCooldownSeconds: 30 };
    const admit = async (): Promise<ClaimedDelivery> =>
      (await admitDue(db, { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 10 }, { count: 10, inFlightLeaseMs: 30_000, mode: 'all' }))
        .claimed.find((c) => c.id === idOfUuid('delivery', id))!;
    const record = (c: ClaimedDelivery, statusCode: number) => ({
      deliveryId: c.id, endpointId: endpoint.id, attemptNumber: c.attempt_count, leaseToken: c.lease_token, trigger: c.next_trigger,
      startedAt: new Date(), durationMs: 3, statusCode, outcome: statusCode < 300 ? ('success' as const) : ('retry' as const),
      errorClass: null, errorMessage: null, responseExcerpt: null, endpointFailure: false,
    });
    // A retry: pending → in_flight (the queue row) → pending (the result), then again to a success.
    const first = await admit();
    expect(await recordAttempt(db, { ...record(first, 500), next: { status: 'pending', at: new Date() } }, limits)).toMatchObject({ applied: true });
    const second = await admit();
    expect(second.attempt_count).toBe(2);
    expect(await recordSuccesses(db, [{ record: { ...record(second, 200), next: { status: 'succeeded' } }, handOff: false }], limits, 30_000)).toEqual([{ applied: true }]);
    const log = await db(TRANSITION_LOG).where({ delivery_id: id }).orderBy('at').select('from_status', 'to_status');
    expect(log.map((l) => `${l.from_status ?? '(created)'} → ${l.to_status}`)).toEqual([
      '(created) → pending', 'pending → in_flight', 'in_flight → pending', 'pending → in_flight', 'in_flight → succeeded',
    ]);
    expect(await forbidden(tenant.id)).toEqual([]);
  });
});
