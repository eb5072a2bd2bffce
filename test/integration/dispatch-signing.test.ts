// What a receiving system sees: every request verifies with the `standardwebhooks` library, the
// headers follow CONTRACT.md ("Outbound request"), the body bytes never change between attempts,
// and during a secret rotation both secrets sign.
import { PassThrough } from 'node:stream';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, settledDelivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

const signed = (r: ReceivedRequest) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

describe('outbound signing', () => {
  let t: TestPlatform;
  let logs = '';
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    // Logs are captured to prove no secret or signature is written to them.
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => (logs += c.toString()));
    t = await startTestPlatform({ logs: stream });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t.stop();
  });

  it('signs every attempt so standardwebhooks verifies it; id and body stay the same across retries', async () => {
    // Two 503s, then 200: three attempts of one delivery.
    const receiver = await startReceiver((_req, res, index) => void res.writeHead(index < 2 ? 503 : 200).end());
    receivers.push(receiver);
    const tenant = await t.createTenant();
    const endpoint = await createEndpoint(tenant, { url: `${receiver.url}/hook` });
    expect(endpoint.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32,}={0,2}$/);
    const published = await tenant.call('POST', '/v1/events', {
      body: { type: 'message.status', messageId: 'msg-42', data: { status: 'delivered', text: 'héllo ✓' } },
      headers: { 'idempotency-key': 'sign-1' },
    });
    expect(published.status).toBe(202);
    const eventId = published.body.id as string;

    const delivery = await settledDelivery(tenant, eventId);
    expect(delivery.status).toBe('succeeded');
    expect(receiver.requests).toHaveLength(3);

    const webhook = new Webhook(endpoint.secret);
    const wrong = new Webhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`);
    receiver.requests.forEach((r, i) => {
      expect(r.method).toBe('POST');
      expect(r.path).toBe('/hook');
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['webhook-id']).toBe(eventId);
      expect(r.headers['webhook-delivery-id']).toBe(delivery.id);
      expect(r.headers['webhook-attempt']).toBe(String(i + 1));
      expect(r.headers['webhook-replay']).toBe('false');
      // The timestamp is this attempt's, not the event's.
      expect(Math.abs(Number(r.headers['webhook-timestamp']) - Math.floor(r.at / 1000))).toBeLessThanOrEqual(1);
      expect(String(r.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(webhook.verify(r.body, signed(r))).toMatchObject({ id: eventId });
      expect(() => wrong.verify(r.body, signed(r))).toThrow();
    });
    // The exact same bytes on every attempt, and the body the contract describes.
    expect(new Set(receiver.requests.map((r) => r.body)).size).toBe(1);
    expect(JSON.parse(receiver.requests[0]!.body)).toEqual({
      id: eventId,
      type: 'message.status',
      timestamp: expect.any(String),
      messageId: 'msg-42',
      data: { status: 'delivered', text: 'héllo ✓' },
    });

    // Neither the secret nor any signature is stored in clear or logged.
    const signatures = receiver.requests.map((r) => String(r.headers['webhook-signature']).slice(3));
    const key = endpoint.secret.slice('whsec_'.length);
    const stored = JSON.stringify([
      await attemptsListed(t.platform.db).where({ delivery_id: delivery.id }),
      await t.platform.db('deliveries').where({ id: uuidOf('delivery', delivery.id) }),
      await t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }),
    ]);
    expect(logs.length).toBeGreaterThan(0);
    for (const text of [stored, logs]) {
      expect(text).not.toContain(key);
      for (const s of signatures) expect(text).not.toContain(s);
    }
  });

  it('signs with both secrets during a rotation; each signature verifies with one of them', async () => {
    const receiver = await startReceiver();
    receivers.push(receiver);
    const tenant = await t.createTenant();
    const endpoint = await createEndpoint(tenant, { url: `${receiver.url}/hook` });
    const publish = async (key: string) => {
      const res = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { key } }, headers: { 'idempotency-key': key } });
      expect(res.status).toBe(202);
      return res.body.id as string;
    };

    const before = await publish('before-rotation');
    await eventually(async () => receiver.requests.length === 1, 'delivery before the rotation');
    expect(String(receiver.requests[0]!.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(receiver.requests[0]!.headers['webhook-id']).toBe(before);

    const rotated = await tenant.call('POST', `/v1/endpoints/${endpoint.id}/secret/rotate`);
    expect(rotated.status).toBe(200);
    const newSecret = rotated.body.secret as string;
    expect(newSecret).toMatch(/^whsec_/);
    expect(newSecret).not.toBe(endpoint.secret);

    const after = await publish('after-rotation');
    const got = await eventually(async () => receiver.requests.find((r) => r.headers['webhook-id'] === after), 'delivery after the rotation');
    const entries = String(got.headers['webhook-signature']).split(' ');
    expect(entries).toHaveLength(2);
    for (const entry of entries) expect(entry).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);

    // Which secret verifies each single signature: one entry each.
    const verifies = (secret: string, entry: string) => {
      try {
        new Webhook(secret).verify(got.body, { ...signed(got), 'webhook-signature': entry });
        return true;
      } catch {
        return false;
      }
    };
    const byOld = entries.filter((e) => verifies(endpoint.secret, e));
    const byNew = entries.filter((e) => verifies(newSecret, e));
    expect(byOld).toHaveLength(1);
    expect(byNew).toHaveLength(1);
    expect(byOld[0]).not.toBe(byNew[0]);
    // Receivers on either secret accept the whole header as sent.
    expect(new Webhook(endpoint.secret).verify(got.body, signed(got))).toMatchObject({ id: after });
    expect(new Webhook(newSecret).verify(got.body, signed(got))).toMatchObject({ id: after });
  });
});
