import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, metricValue, publish, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Deleting an endpoint dead-letters what still waited for it as `endpoint_deleted` (a disabled
 * endpoint's work is `endpoint_disabled`), and those dead letters are counted like every other
 * (`webhook_deliveries_dead_lettered_total{reason="endpoint_deleted"}`). Role `api`: no worker, so
 * the deliveries stay where each test puts them. Work that was already past admission when the
 * endpoint went (queued, in flight) meets the same reason when the claim or the sweep reaches it.
 */

let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
});
afterAll(async () => {
  await t?.stop();
});

const deadLettered = async (reason: string) =>
  metricValue(await (await fetch(`${t.url}/metrics`)).text(), 'webhook_deliveries_dead_lettered_total', { reason });
const deliveryOf = (id: string) => t.platform.db('deliveries').where({ id }).first('status', 'dead_reason', 'last_error');
// Deliveries hold their event as the uuid its TypeID encodes.
const deliveryIdOf = async (eventId: string) => (await t.platform.db('deliveries').where({ event_id: uuidOf('event', eventId) }).first('id')).id as string;

describe('deleting an endpoint', () => {
  it('dead-letters its 5 waiting deliveries as endpoint_deleted and counts all 5 in the dead-letter metric', async () => {
    const tenant = await t.createTenant('delete');
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/gone', eventTypes: ['gone.*'] });
    await publishMany(tenant, 5, 5, 'gone.created');
    const [deleted, disabled] = [await deadLettered('endpoint_deleted'), await deadLettered('endpoint_disabled')];
    const res = await tenant.call('DELETE', `/v1/endpoints/${ep.id}`);
    expect(res.status).toBe(204);
    const rows = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id) }).select('status', 'dead_reason');
    expect(rows).toEqual(Array.from({ length: 5 }, () => ({ status: 'dead', dead_reason: 'endpoint_deleted' })));
    expect((await deadLettered('endpoint_deleted')) - deleted).toBe(5);
    expect((await deadLettered('endpoint_disabled')) - disabled).toBe(0);
  });

  it('a delivery claimed after its endpoint was deleted dies unsent as endpoint_deleted', async () => {
    const tenant = await t.createTenant('delete-claim');
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/gone', eventTypes: ['gone.*'] });
    const id = await deliveryIdOf(await publish(tenant, 'gone.created', {}));
    // The state a race between admission and the delete leaves: queued, its endpoint already gone.
    await t.platform.db('deliveries').where({ id }).update({ status: 'queued', lease_until: t.platform.db.raw(`now() + interval '1 minute'`) });
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).update({ deleted_at: t.platform.db.fn.now() });
    const before = await deadLettered('endpoint_deleted');
    const claimed = await t.platform.lifecycle.claim(idOfUuid('delivery', id), 60_000);
    expect(claimed?.status).toBe('dead');
    expect(await deliveryOf(id)).toEqual({ status: 'dead', dead_reason: 'endpoint_deleted', last_error: 'endpoint was deleted' });
    expect((await deadLettered('endpoint_deleted')) - before).toBe(1);
  });

  it('a delivery in flight when its endpoint is deleted dies as endpoint_deleted once the sweep takes it back', async () => {
    const tenant = await t.createTenant('delete-sweep');
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/gone', eventTypes: ['gone.*'] });
    const id = await deliveryIdOf(await publish(tenant, 'gone.created', {}));
    // A worker claimed it and died: in flight, its lease already over.
    await t.platform.db('deliveries')
      .where({ id })
      .update({ status: 'in_flight', attempt_count: 1, lease_until: t.platform.db.raw(`now() - interval '1 second'`) });
    expect((await tenant.call('DELETE', `/v1/endpoints/${ep.id}`)).status).toBe(204);
    expect(await deliveryOf(id)).toMatchObject({ status: 'in_flight' });
    const before = await deadLettered('endpoint_deleted');
    const swept = await t.platform.lifecycle.sweep();
    expect(swept.deadDeleted).toBeGreaterThanOrEqual(1);
    expect(await deliveryOf(id)).toEqual({ status: 'dead', dead_reason: 'endpoint_deleted', last_error: 'endpoint was deleted' });
    expect((await deadLettered('endpoint_deleted')) - before).toBe(swept.deadDeleted);
  });
});
