import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { inspect } from '../helpers/invariants.js';
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
    const { id } = await db('deliveries').where({ event_id: eventId }).first('id');
    // created → pending (fan-out), pending → in_flight (admission to a local slot), in_flight → succeeded.
    await db('deliveries').where({ id }).update({ status: 'in_flight', lease_until: db.raw(`now() + interval '1 minute'`) });
    await db('deliveries').where({ id }).update({ status: 'succeeded', lease_until: null, succeeded_at: db.fn.now() });
    expect(await forbidden(tenant.id)).toEqual([]);

    await db('deliveries').where({ id }).update({ status: 'in_flight', lease_until: db.raw(`now() + interval '1 minute'`), succeeded_at: null });
    const violations = await forbidden(tenant.id);
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatchObject({ kind: 'forbidden_transition', deliveryId: id });
    expect(violations[0]!.message).toContain('succeeded → in_flight');
  });
});
