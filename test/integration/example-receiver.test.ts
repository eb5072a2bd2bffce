// The example in examples/receiver, run against a live platform: what docs/receiving.md tells a
// customer to build must actually verify our requests and absorb our at-least-once redeliveries.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createReceiver, type DeliveryInfo, type WebhookEvent } from '../../examples/receiver/server.js';
import { request } from '../helpers/http.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

interface Example {
  url: string;
  received: Array<{ event: WebhookEvent; delivery: DeliveryInfo }>;
}

describe('examples/receiver against a live dispatcher', () => {
  let t: TestPlatform;
  const servers: Server[] = [];
  const fronts: Receiver[] = [];

  /** Starts the example on 127.0.0.1:0 and records what its onEvent sees. */
  async function startExample(secret: string): Promise<Example> {
    const received: Example['received'] = [];
    const server = createReceiver({ secret, onEvent: (event, delivery) => void received.push({ event, delivery }) });
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received };
  }

  async function deliveriesOf(tenant: TestTenant, eventId: string) {
    const res = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}`);
    expect(res.status).toBe(200);
    return res.body.data as Array<{ id: string; status: string }>;
  }

  async function publish(tenant: TestTenant, key: string, body: unknown): Promise<string> {
    const res = await tenant.call('POST', '/v1/events', { headers: { 'idempotency-key': key }, body });
    expect(res.status).toBe(202);
    return res.body.id;
  }

  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterEach(async () => {
    for (const s of servers.splice(0)) {
      s.closeAllConnections();
      await new Promise((resolve) => s.close(resolve));
    }
    for (const f of fronts.splice(0)) await f.close();
  });
  afterAll(async () => {
    await t.stop();
  });

  it('verifies and hands over a published event and an accepted provider callback', async () => {
    const tenant = await t.createTenant('example-basic');
    // The customer's order of work: create the endpoint (which reveals the secret), deploy the
    // receiver with that secret, then point the endpoint at it.
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/not-deployed-yet' } });
    expect(endpoint.status).toBe(201);
    const example = await startExample(endpoint.body.secret);
    const patched = await tenant.call('PATCH', `/v1/endpoints/${endpoint.body.id}`, { body: { url: `${example.url}/webhooks` } });
    expect(patched.status).toBe(200);

    const publishedId = await publish(tenant, 'invoice-1', { type: 'invoice.paid', messageId: 'inv_1', data: { amount: 42 } });
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'momo' } });
    expect(source.status).toBe(201);
    const callback = automation.body('8a6f2b1e-0000-4000-8000-00000000e001');
    const accepted = await t.call('POST', `/inbound/${source.body.id}`, { rawBody: callback, headers: automation.headers(source.body.secret, callback) });
    expect(accepted.status).toBe(200);
    expect(accepted.body.status).toBe('accepted');
    const callbackId: string = accepted.body.eventId;

    await eventually(async () => example.received.length >= 2, 'both events handed to onEvent');
    const byId = new Map(example.received.map((r) => [r.event.id, r]));
    expect(example.received).toHaveLength(2);
    const [publishedDelivery] = await deliveriesOf(tenant, publishedId);
    expect(byId.get(publishedId)).toMatchObject({
      event: { id: publishedId, type: 'invoice.paid', messageId: 'inv_1', data: { amount: 42 } },
      delivery: { deliveryId: publishedDelivery!.id, attempt: 1, replay: false },
    });
    expect(byId.get(callbackId)).toMatchObject({
      event: { id: callbackId, type: 'order.created', data: { orderId: 'o1' } },
      delivery: { attempt: 1, replay: false },
    });

    // The platform saw the example's 204 as success on the first attempt.
    for (const id of [publishedId, callbackId]) {
      const [d] = await eventually(async () => {
        const list = await deliveriesOf(tenant, id);
        return list[0]?.status === 'succeeded' && list;
      }, `delivery of ${id} succeeded`);
      const detail = await tenant.call('GET', `/v1/deliveries/${d!.id}`);
      expect(detail.body.attempts).toMatchObject([{ trigger: 'initial', statusCode: 204, outcome: 'success' }]);
    }
  });

  it('hands a redelivered webhook-id to onEvent once when its first 2xx was lost', async () => {
    const tenant = await t.createTenant('example-dedupe');
    let exampleUrl = '';
    const upstreamStatuses: number[] = [];
    // A hop in front of the example (think load balancer): the example records the event and
    // answers 204, but the first answer is lost and the platform sees 500 instead. That is the case
    // at-least-once delivery exists for, and the one the example's dedupe must absorb.
    const front = await startReceiver(async (req, res, index) => {
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => k.startsWith('webhook-') || k === 'content-type'),
      ) as Record<string, string>;
      const upstream = await fetch(`${exampleUrl}${req.path}`, { method: 'POST', headers, body: req.body });
      await upstream.arrayBuffer();
      upstreamStatuses.push(upstream.status);
      res.writeHead(index === 0 ? 500 : upstream.status).end();
    });
    fronts.push(front);
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${front.url}/webhooks` } });
    expect(endpoint.status).toBe(201);
    const example = await startExample(endpoint.body.secret);
    exampleUrl = example.url;

    const eventId = await publish(tenant, 'shipment-1', { type: 'shipment.sent', data: { parcel: 'p1' } });
    const [delivery] = await eventually(async () => {
      const list = await deliveriesOf(tenant, eventId);
      return list[0]?.status === 'succeeded' && list;
    }, 'delivery succeeded after one retry');

    // Two requests with the same webhook-id and body reached the example, and both were verified...
    expect(front.requests.map((r) => [r.headers['webhook-id'], r.headers['webhook-attempt']])).toEqual([
      [eventId, '1'],
      [eventId, '2'],
    ]);
    expect(front.requests[1]!.body).toBe(front.requests[0]!.body);
    expect(upstreamStatuses).toEqual([204, 204]);
    // ...but the work ran once.
    expect(example.received.map((r) => r.event.id)).toEqual([eventId]);
    expect(example.received[0]!.delivery.attempt).toBe(1);

    const detail = await tenant.call('GET', `/v1/deliveries/${delivery!.id}`);
    expect(detail.body.attempts).toMatchObject([
      { trigger: 'initial', statusCode: 500, outcome: 'retry' },
      { trigger: 'retry', statusCode: 204, outcome: 'success' },
    ]);
  });

  it('refuses a tampered body, a stale timestamp and a foreign secret, and accepts the genuine request', async () => {
    const secret = `whsec_${Buffer.alloc(24, 7).toString('base64')}`;
    const example = await startExample(secret);
    const id = 'evt_direct_1';
    const body = JSON.stringify({ id, type: 'invoice.paid', timestamp: new Date().toISOString(), messageId: null, data: { amount: 1 } });
    const signed = (key: string, at: Date, payload = body) => ({
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': new Webhook(key).sign(id, at, payload),
    });
    const send = (headers: Record<string, string>, rawBody = body) => request(example.url, 'POST', '/webhooks', { rawBody, headers });

    const tampered = await send(signed(secret, new Date()), body.replace('"amount":1', '"amount":1000'));
    expect(tampered.status).toBe(401);
    const stale = await send(signed(secret, new Date(Date.now() - 10 * 60_000)));
    expect(stale.status).toBe(401);
    const foreign = await send(signed(`whsec_${Buffer.alloc(24, 9).toString('base64')}`, new Date()));
    expect(foreign.status).toBe(401);
    expect(example.received).toHaveLength(0);

    // Control: the same request, untouched, goes through, so the refusals above were about content.
    const genuine = await send(signed(secret, new Date()));
    expect(genuine.status).toBe(204);
    await eventually(async () => example.received.length === 1, 'genuine request handed to onEvent');
    expect(example.received[0]!.event).toMatchObject({ id, data: { amount: 1 } });
  });

  it('accepts a request signed during a secret rotation with either the old or the new secret', async () => {
    const tenant = await t.createTenant('example-rotation');
    const capture = await startReceiver();
    fronts.push(capture);
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${capture.url}/webhooks` } });
    expect(endpoint.status).toBe(201);
    const rotated = await tenant.call('POST', `/v1/endpoints/${endpoint.body.id}/secret/rotate`);
    expect(rotated.status).toBe(200);

    const eventId = await publish(tenant, 'rotation-1', { type: 'invoice.paid', data: { amount: 5 } });
    const [got] = await eventually(async () => capture.requests.length > 0 && capture.requests, 'delivery captured');
    expect(String(got!.headers['webhook-signature']).split(' ')).toHaveLength(2);

    // The captured request, forwarded unchanged to a receiver still on the old secret and to one
    // already on the new secret: both verify it, so the switch can happen at any time in the 24 h.
    for (const secret of [endpoint.body.secret as string, rotated.body.secret as string]) {
      const example = await startExample(secret);
      const headers = Object.fromEntries(
        Object.entries(got!.headers).filter(([k]) => k.startsWith('webhook-') || k === 'content-type'),
      ) as Record<string, string>;
      const res = await request(example.url, 'POST', '/webhooks', { rawBody: got!.body, headers });
      expect(res.status).toBe(204);
      await eventually(async () => example.received[0]?.event.id === eventId, 'rotated delivery handed to onEvent');
    }
  });

  it('verifies an ed25519 endpoint\'s deliveries with its public key, and refuses a changed body', async () => {
    const tenant = await t.createTenant('example-ed25519');
    const capture = await startReceiver();
    fronts.push(capture);
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${capture.url}/webhooks`, signature: { scheme: 'ed25519' } } });
    expect(endpoint.status).toBe(201);
    const eventId = await publish(tenant, 'ed25519-1', { type: 'invoice.paid', data: { amount: 7 } });
    const [got] = await eventually(async () => capture.requests.length > 0 && capture.requests, 'delivery captured');
    expect(String(got!.headers['webhook-signature'])).toMatch(/^v1a,/);

    const example = await startExample(endpoint.body.signature.publicKey as string);
    const headers = Object.fromEntries(
      Object.entries(got!.headers).filter(([k]) => k.startsWith('webhook-') || k === 'content-type'),
    ) as Record<string, string>;
    const tampered = await request(example.url, 'POST', '/webhooks', { rawBody: got!.body.replace('"amount":7', '"amount":700'), headers });
    expect(tampered.status).toBe(401);
    const genuine = await request(example.url, 'POST', '/webhooks', { rawBody: got!.body, headers });
    expect(genuine.status).toBe(204);
    await eventually(async () => example.received[0]?.event.id === eventId, 'ed25519 delivery handed to onEvent');
    expect(example.received).toHaveLength(1);
  });
});
