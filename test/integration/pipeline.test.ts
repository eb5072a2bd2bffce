import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { automation } from '../helpers/providers.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

describe('callback to endpoint, end to end', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let receiver: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('acme');
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await t.stop();
  });

  it('verifies, stores, signs and forwards an automation callback', async () => {
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'momo' } });
    expect(source.status).toBe(201);
    expect(source.body.secret).toMatch(/^[0-9a-f]{64}$/);
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/hook` } });
    expect(endpoint.status).toBe(201);

    const body = automation.body('8a6f2b1e-0000-4000-8000-000000000001');
    const res = await t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: automation.headers(source.body.secret, body) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'accepted' });

    const [got] = await eventually(async () => receiver.requests.length > 0 && receiver.requests, 'delivery at the receiver');
    expect(got!.headers['webhook-id']).toBe(res.body.eventId);
    const verified = new Webhook(endpoint.body.secret).verify(got!.body, {
      'webhook-id': String(got!.headers['webhook-id']),
      'webhook-timestamp': String(got!.headers['webhook-timestamp']),
      'webhook-signature': String(got!.headers['webhook-signature']),
    }) as { id: string; type: string; data: unknown };
    expect(verified).toMatchObject({ id: res.body.eventId, type: 'order.created', data: { orderId: 'o1' } });

    const delivery = await eventually(async () => {
      const list = await tenant.call('GET', `/v1/deliveries?eventId=${res.body.eventId}`);
      return list.body.data[0]?.status === 'succeeded' && list.body.data[0];
    }, 'delivery succeeded');
    const detail = await tenant.call('GET', `/v1/deliveries/${delivery.id}`);
    expect(detail.body.attempts).toHaveLength(1);
    expect(detail.body.attempts[0]).toMatchObject({ trigger: 'initial', statusCode: 200, outcome: 'success' });
  });
});
