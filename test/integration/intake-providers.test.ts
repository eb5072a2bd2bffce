import { createHmac, randomUUID } from 'node:crypto';
import '@shopify/shopify-api/adapters/web-api';
import { ApiVersion, shopifyApi } from '@shopify/shopify-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SourceType } from '../../src/domain/sources.js';
import {
  createEndpoint,
  createSource,
  expectError,
  expectOutcome,
  flipOneByte,
  nowSeconds,
  postCallback,
  rowsOfEvent,
  storedFor,
  withoutHeader,
  type Callback,
  type TestSource,
} from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { githubPush, presets, shopifyOrder, stripeEvent } from '../helpers/provider-presets.js';

/**
 * The provider presets and the generic hmac source through real HTTP: callbacks signed by each
 * provider's own library are accepted and stored as one event per provider id; a changed body, an
 * old timestamp or a missing signature is refused and leaves nothing behind.
 * Role `api`: no dispatcher runs, so deliveries stay `pending` exactly as intake committed them.
 */

let t: TestPlatform;
let tenant: TestTenant;
let endpointId: string;

/** A configurable source shaped like a typical in-house sender: timestamped, base64 SHA-512. */
const HMAC_CONFIG = {
  header: 'X-Acme-Signature',
  algorithm: 'sha512',
  encoding: 'base64',
  prefix: 'v1=',
  timestampHeader: 'X-Acme-Timestamp',
  toleranceSeconds: 120,
  signedContent: '{timestamp}.{body}',
  idHeader: 'X-Acme-Delivery',
  typeHeader: 'X-Acme-Event',
};

function acme(secret: string, body: string, id: string = randomUUID(), t = nowSeconds()): Callback {
  const mac = createHmac('sha512', secret).update(`${t}.${body}`).digest('base64');
  return {
    rawBody: body,
    headers: { 'content-type': 'application/json', 'x-acme-signature': `v1=${mac}`, 'x-acme-timestamp': String(t), 'x-acme-delivery': id, 'x-acme-event': 'shipment.sent' },
  };
}

interface Preset {
  type: SourceType;
  secret: string;
  hmac?: object;
  /** A callback for the provider event `id`, signed now (or at `t`). */
  callback(secret: string, id: string, t?: number): Promise<Callback> | Callback;
  expected: { type: string; messageId: string | null };
  signatureHeader: string;
  /** Only the timestamped contracts. */
  timestamped: boolean;
}

const stripeObject = 'in_1QxYz';
const presetsUnderTest: Preset[] = [
  {
    type: 'stripe',
    secret: 'whsec_test_5b1f0e3c9a7d4e2f8b6a1c0d',
    callback: (secret, id, t) => presets.stripe(secret, stripeEvent(id, 'invoice.paid', stripeObject), t),
    expected: { type: 'invoice.paid', messageId: stripeObject },
    signatureHeader: 'stripe-signature',
    timestamped: true,
  },
  {
    type: 'github',
    secret: 'github-webhook-secret-0123456789',
    callback: (secret, id) => presets.github(secret, githubPush(), id, 'push'),
    expected: { type: 'push', messageId: null },
    signatureHeader: 'x-hub-signature-256',
    timestamped: false,
  },
  {
    type: 'shopify',
    secret: 'shpss_0123456789abcdef0123456789abcdef',
    callback: (secret, id) => presets.shopify(secret, shopifyOrder(), id, 'orders/create'),
    expected: { type: 'orders.create', messageId: null },
    signatureHeader: 'x-shopify-hmac-sha256',
    timestamped: false,
  },
  {
    type: 'hmac',
    secret: 'acme-signing-secret-0123456789',
    hmac: HMAC_CONFIG,
    callback: (secret, id, t) => acme(secret, JSON.stringify({ shipment: 'shp_1', carrier: 'dhl' }), id, t),
    expected: { type: 'shipment.sent', messageId: null },
    signatureHeader: 'x-acme-signature',
    timestamped: true,
  },
];

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('providers');
  endpointId = await createEndpoint(tenant, 'https://receiver.example.com/hooks');
});
afterAll(async () => {
  await t?.stop();
});

describe.each(presetsUnderTest)('$type source', (preset) => {
  let source: TestSource;
  beforeAll(async () => {
    source = await createSource(tenant, preset.type, preset.secret, preset.hmac);
  });

  it('accepts a valid delivery, stores one event with the provider type, and one more copy is a duplicate', async () => {
    const id = `${preset.type}-${randomUUID()}`;
    const first = expectOutcome(await postCallback(t, source.id, await preset.callback(source.secret, id)), 'accepted');
    const rows = await rowsOfEvent(t.platform.db, first.eventId);
    expect(rows.event).toMatchObject({ type: preset.expected.type, message_id: preset.expected.messageId, source_id: source.id });
    expect(rows.deliveries).toEqual([{ endpoint_id: endpointId, status: 'pending', dead_reason: null }]);
    const event = await tenant.call('GET', `/v1/events/${first.eventId}`);
    expect(event.status, event.text).toBe(200);
    expect(event.body).toMatchObject({ id: first.eventId, type: preset.expected.type });

    // The provider retries the same event: newly signed (a later timestamp where there is one).
    const again = await preset.callback(source.secret, id, nowSeconds() + 1);
    const repeat = expectOutcome(await postCallback(t, source.id, again), 'duplicate');
    expect(repeat.eventId).toBe(first.eventId);
    const after = await rowsOfEvent(t.platform.db, first.eventId);
    expect(after.receipts).toHaveLength(2);
    expect(after.deliveries).toHaveLength(1);
    expect(Number((await t.platform.db('events').where({ source_id: source.id, dedupe_key: id }).count({ n: '*' }))[0]!.n)).toBe(1);
  });

  it('refuses a changed body, a missing signature and a wrong secret, and stores nothing', async () => {
    const before = await storedFor(t.platform.db, source.id);
    const valid = await preset.callback(source.secret, randomUUID());
    expectError(await postCallback(t, source.id, { ...valid, rawBody: flipOneByte(String(valid.rawBody)) }), 401, 'bad_signature');
    expectError(await postCallback(t, source.id, withoutHeader(valid, preset.signatureHeader)), 401, 'missing_signature');
    expectError(await postCallback(t, source.id, await preset.callback('not-the-secret-0123456789', randomUUID())), 401, 'bad_signature');
    expect(await storedFor(t.platform.db, source.id)).toEqual(before);
  });
});

describe.each(presetsUnderTest.filter((preset) => preset.timestamped))('$type source, timestamped', (preset) => {
  it('refuses a timestamp outside the tolerance, old or in the future', async () => {
    const source = await createSource(tenant, preset.type, preset.secret, preset.hmac);
    const before = await storedFor(t.platform.db, source.id);
    const tolerance = (preset.hmac as { toleranceSeconds?: number } | undefined)?.toleranceSeconds ?? 300;
    for (const at of [nowSeconds() - tolerance - 10, nowSeconds() + tolerance + 10]) {
      expectError(await postCallback(t, source.id, await preset.callback(source.secret, randomUUID(), at)), 401, 'timestamp_out_of_range');
    }
    expect(await storedFor(t.platform.db, source.id)).toEqual(before);
  });
});

describe('preset details', () => {
  it('stripe: any of several v1 signatures matches, as while Stripe rolls a secret', async () => {
    const source = await createSource(tenant, 'stripe', 'whsec_rolling_0123456789abcdef');
    const cb = presets.stripe(['whsec_old_secret_0123456789abcd', source.secret], stripeEvent());
    expect(cb.headers['stripe-signature']!.match(/v1=/g)).toHaveLength(2);
    expectOutcome(await postCallback(t, source.id, cb), 'accepted');
  });

  it('github: a delivery id seen before is a duplicate even with another body; a new id with the same body is new', async () => {
    const source = await createSource(tenant, 'github', 'github-webhook-secret-0123456789');
    const body = githubPush();
    const first = expectOutcome(await postCallback(t, source.id, await presets.github(source.secret, body, 'd-1')), 'accepted');
    expect(expectOutcome(await postCallback(t, source.id, await presets.github(source.secret, githubPush('refs/heads/x'), 'd-1')), 'duplicate').eventId).toBe(first.eventId);
    expect(expectOutcome(await postCallback(t, source.id, await presets.github(source.secret, body, 'd-2')), 'accepted').eventId).not.toBe(first.eventId);
  });

  it('shopify: the callback the tests send is one Shopify\'s own validator accepts', async () => {
    const secret = 'shpss_0123456789abcdef0123456789abcdef';
    const shopify = shopifyApi({ apiKey: 'key', apiSecretKey: secret, apiVersion: ApiVersion.January25, hostName: 'relay.example.com', isEmbeddedApp: false, logger: { level: 0 } });
    const cb = presets.shopify(secret, shopifyOrder());
    const rawRequest = new Request('https://relay.example.com/inbound/x', { method: 'POST', headers: cb.headers, body: String(cb.rawBody) });
    const verdict = await shopify.webhooks.validate({ rawBody: String(cb.rawBody), rawRequest });
    expect(verdict).toMatchObject({ valid: true, topic: 'ORDERS_CREATE' });
    const tampered = await shopify.webhooks.validate({ rawBody: flipOneByte(String(cb.rawBody)), rawRequest });
    expect(tampered.valid).toBe(false);
  });
});

describe('hmac source configuration', () => {
  it('is shown with the source and never with another type', async () => {
    const source = await createSource(tenant, 'hmac', undefined, HMAC_CONFIG);
    const got = await tenant.call('GET', `/v1/sources/${source.id}`);
    expect(got.body).toMatchObject({ type: 'hmac', hmac: HMAC_CONFIG });
    expect(source.secret).toMatch(/^[0-9a-f]{64}$/);
    const github = await createSource(tenant, 'github');
    expect((await tenant.call('GET', `/v1/sources/${github.id}`)).body).not.toHaveProperty('hmac');
  });

  it('refuses a bad configuration with every problem listed', async () => {
    const res = await tenant.call('POST', '/v1/sources', {
      body: {
        type: 'hmac',
        name: '',
        hmac: { header: 'X Bad', algorithm: 'md5', encoding: 'hex', signedContent: '{timestamp}.{payload}', toleranceSeconds: 60 },
      },
    });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    const paths = (res.body.error.details as Array<{ path: string }>).map((d) => d.path).sort();
    expect(paths).toEqual(['hmac.algorithm', 'hmac.header', 'hmac.signedContent', 'hmac.signedContent', 'hmac.timestampHeader', 'hmac.toleranceSeconds', 'name']);

    const missing = await tenant.call('POST', '/v1/sources', { body: { type: 'hmac', name: 'no config' } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.details).toEqual([{ path: 'hmac', message: expect.any(String) }]);
    const misplaced = await tenant.call('POST', '/v1/sources', { body: { type: 'stripe', name: 'x', hmac: HMAC_CONFIG } });
    expect(misplaced.status).toBe(400);
    expect(misplaced.body.error.details).toEqual([{ path: 'hmac', message: expect.any(String) }]);
  });
});
