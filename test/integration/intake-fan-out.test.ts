import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, createSource, expectOutcome, postCallback, readMetrics, rowsOfEvent, sampleOf, sign, type TestSource } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * Which endpoints an accepted callback reaches, seen at real receivers with the dispatcher running
 * (role `all`): filters with `.*` prefixes, and disabled endpoints that must get a dead delivery
 * (replayable later) but never a request.
 */

let t: TestPlatform;
let tenant: TestTenant;
let source: TestSource;
const receivers = {} as Record<'all' | 'orders' | 'exact' | 'disabled', Receiver>;
const endpoints = {} as Record<keyof typeof receivers, string>;

beforeAll(async () => {
  t = await startTestPlatform();
  tenant = await t.createTenant('fan-out');
  source = await createSource(tenant, 'momo-automation');
  for (const name of ['all', 'orders', 'exact', 'disabled'] as const) receivers[name] = await startReceiver();
  endpoints.all = await createEndpoint(tenant, `${receivers.all.url}/all`);
  endpoints.orders = await createEndpoint(tenant, `${receivers.orders.url}/orders`, ['order.*']);
  endpoints.exact = await createEndpoint(tenant, `${receivers.exact.url}/exact`, ['order.created']);
  endpoints.disabled = await createEndpoint(tenant, `${receivers.disabled.url}/disabled`);
  const patched = await tenant.call('PATCH', `/v1/endpoints/${endpoints.disabled}`, { body: { status: 'disabled' } });
  expect(patched.status, patched.text).toBe(200);
  expect(patched.body.status).toBe('disabled');
});
afterAll(async () => {
  await t?.stop();
  await Promise.all(Object.values(receivers).map((r) => r.close()));
});

async function accept(event: string): Promise<string> {
  const body = automation.body(randomUUID(), event);
  return expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, body)), 'accepted').eventId;
}

const received = (name: keyof typeof receivers, eventId: string) => receivers[name].requests.filter((r) => r.headers['webhook-id'] === eventId);

describe('fan-out of an accepted callback', () => {
  it('reaches the catch-all, the `order.*` prefix and the exact filter; a disabled endpoint gets a dead delivery and no request', async () => {
    const deadBefore = sampleOf(await readMetrics(t.url), 'webhook_deliveries_dead_lettered_total', { reason: 'endpoint_disabled' });
    const eventId = await accept('order.created');

    const rows = await rowsOfEvent(t.platform.db, eventId);
    const disabled = rows.deliveries.find((d) => d.endpoint_id === endpoints.disabled);
    expect(disabled).toEqual({ endpoint_id: endpoints.disabled, status: 'dead', dead_reason: 'endpoint_disabled' });
    expect(rows.deliveries).toHaveLength(4);

    // Dispatch demonstrably ran for this event: the three active endpoints each got it once.
    await eventually(async () => ['all', 'orders', 'exact'].every((n) => received(n as 'all', eventId).length === 1), 'the three active endpoints received it');
    const list = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}`);
    expect(list.status).toBe(200);
    const byEndpoint = Object.fromEntries((list.body.data as Array<{ endpointId: string; status: string; deadReason: string | null; attemptCount: number }>).map((d) => [d.endpointId, d]));
    await eventually(async () => {
      const again = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}&status=succeeded`);
      return again.body.data.length === 3;
    }, 'three deliveries succeeded');
    expect(byEndpoint[endpoints.disabled]).toMatchObject({ status: 'dead', deadReason: 'endpoint_disabled', attemptCount: 0 });
    expect(receivers.disabled.requests).toHaveLength(0);
    const attempts = await t.platform.db('attempts').join('deliveries', 'deliveries.id', 'attempts.delivery_id').where('deliveries.endpoint_id', endpoints.disabled).count<{ count: number }[]>('* as count');
    expect(attempts[0]!.count).toBe(0);
    expect(sampleOf(await readMetrics(t.url), 'webhook_deliveries_dead_lettered_total', { reason: 'endpoint_disabled' }) - deadBefore).toBe(1);
  });

  it('matches `order.*` only on the `order.` prefix, and an exact filter only on its type', async () => {
    const updated = await accept('order.updated');
    const orderbook = await accept('orderbook.updated');
    const endpointsOf = async (eventId: string) =>
      (await rowsOfEvent(t.platform.db, eventId)).deliveries.filter((d) => d.status !== 'dead').map((d) => d.endpoint_id).sort();
    expect(await endpointsOf(updated)).toEqual([endpoints.all, endpoints.orders].sort());
    expect(await endpointsOf(orderbook)).toEqual([endpoints.all]);
    await eventually(async () => received('all', orderbook).length === 1 && received('orders', updated).length === 1, 'deliveries arrived');
    expect(received('orders', orderbook)).toHaveLength(0);
    expect(received('exact', updated)).toHaveLength(0);
  });

  it('an endpoint enabled again receives new events', async () => {
    const patched = await tenant.call('PATCH', `/v1/endpoints/${endpoints.disabled}`, { body: { status: 'active' } });
    expect(patched.status, patched.text).toBe(200);
    const eventId = await accept('order.created');
    await eventually(async () => received('disabled', eventId).length === 1, 'the re-enabled endpoint received the event');
    // What was dead-lettered while it was off stays so (it takes a replay), it is not sent on its own.
    expect(receivers.disabled.requests.map((r) => r.headers['webhook-id'])).toEqual([eventId]);
  });
});
