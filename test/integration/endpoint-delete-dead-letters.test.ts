import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, metricValue, publishMany } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * Deleting an endpoint dead-letters what still waited for it, and those dead letters are counted
 * like every other (`webhook_deliveries_dead_lettered_total{reason="endpoint_disabled"}`). Role
 * `api`: no worker, so the deliveries are still pending when the endpoint goes.
 */

let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
});
afterAll(async () => {
  await t?.stop();
});

const deadLettered = async () => metricValue(await (await fetch(`${t.url}/metrics`)).text(), 'webhook_deliveries_dead_lettered_total', { reason: 'endpoint_disabled' });

describe('deleting an endpoint', () => {
  it('dead-letters its 5 waiting deliveries and counts all 5 in the dead-letter metric', async () => {
    const tenant = await t.createTenant('delete');
    const ep = await createEndpoint(tenant, { url: 'http://127.0.0.1:9/gone', eventTypes: ['gone.*'] });
    await publishMany(tenant, 5, 5, 'gone.created');
    const before = await deadLettered();
    const res = await tenant.call('DELETE', `/v1/endpoints/${ep.id}`);
    expect(res.status).toBe(204);
    const rows = await t.platform.db('deliveries').where({ endpoint_id: ep.id }).select('status', 'dead_reason');
    expect(rows).toHaveLength(5);
    expect(rows.every((r) => r.status === 'dead' && r.dead_reason === 'endpoint_disabled')).toBe(true);
    expect((await deadLettered()) - before).toBe(5);
  });
});
