import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { signStandardWebhook } from '../../src/domain/signing.js';
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
  sign,
  SPEC_VECTOR,
  storedFor,
  withoutHeader,
  type Callback,
  type TestSource,
} from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation, communication } from '../helpers/providers.js';

/**
 * POST /inbound/:sourceId for each provider contract: what is accepted and stored, and that every
 * rejection answers the contract's status and error shape and leaves nothing behind.
 * Role `api`: no dispatcher runs, so deliveries stay `pending` exactly as intake committed them.
 */

// Small enough to test cheaply, large enough for the 20 kB deep-nesting body below.
const MAX_BODY_BYTES = 32 * 1024;

let t: TestPlatform;
let tenant: TestTenant;
const endpoints = { all: '', orders: '', messages: '', invoices: '', never: '' };
const sources = {} as Record<SourceType, TestSource>;

interface Kind {
  type: SourceType;
  /** A fresh, validly signed callback with a unique event and the endpoints it must fan out to. */
  valid(secret: string, padding?: number): { cb: Callback; eventType: string; endpoints: (keyof typeof endpoints)[] };
  malformedJson(secret: string): Callback;
  /** Signed bodies that parse as JSON but lack a field the contract requires. */
  missingField(secret: string): Callback[];
  /** A signed body whose id or type carries U+0000, which PostgreSQL text cannot store. */
  nulField(secret: string): Callback;
  /** A fresh signed event whose payload holds `nested` (raw JSON text). */
  carrying(secret: string, nested: string): Callback;
  signatureHeaders: string[];
  /** Only the timestamped contracts. */
  at?(secret: string, t: number): Callback;
}

const pad = (n: number) => (n > 0 ? { note: 'x'.repeat(n) } : {});

const kinds: Kind[] = [
  {
    type: 'momo-communication',
    valid: (secret, padding = 0) => {
      const body = JSON.stringify({ event: 'message.status', message_id: `m-${randomUUID()}`, status: 'delivered', timestamp: new Date().toISOString(), ...pad(padding) });
      return { cb: sign.communication(secret, body), eventType: 'message.status', endpoints: ['all', 'messages'] };
    },
    malformedJson: (secret) => sign.communication(secret, '{"event":"message.status","message_id":"m1",'),
    missingField: (secret) => [
      // message.status without a status: the transition that makes the dedupe key is unknown.
      sign.communication(secret, JSON.stringify({ event: 'message.status', message_id: 'm-missing', timestamp: new Date().toISOString() })),
      sign.communication(secret, JSON.stringify({ message_id: 'm-missing', status: 'sent' })),
    ],
    nulField: (secret) => sign.communication(secret, '{"event":"message.status","message_id":"m\\u0000","status":"sent"}'),
    carrying: (secret, nested) => sign.communication(secret, `{"event":"message.status","message_id":"m-${randomUUID()}","status":"sent","extra":${nested}}`),
    signatureHeaders: ['x-signature'],
  },
  {
    type: 'momo-automation',
    valid: (secret, padding = 0) => {
      const body = JSON.stringify({ ...JSON.parse(automation.body(randomUUID())), ...pad(padding) });
      return { cb: sign.automation(secret, body), eventType: 'order.created', endpoints: ['all', 'orders'] };
    },
    malformedJson: (secret) => sign.automation(secret, '{"id":"x","event":"order.created"'),
    missingField: (secret) => [
      sign.automation(secret, JSON.stringify({ id: randomUUID(), event: 'order.created', data: {} })), // no subscription
      sign.automation(secret, JSON.stringify({ event: 'order.created', subscription: { id: 'sub_1' }, data: {} })), // no id
      sign.automation(secret, JSON.stringify({ id: randomUUID(), event: 'order.created', subscription: { id: 'sub_1' } })), // no data
    ],
    nulField: (secret) => sign.automation(secret, JSON.stringify({ id: 'a\u0000b', event: 'order.created', subscription: { id: 'sub_1' }, data: {} })),
    carrying: (secret, nested) => sign.automation(secret, `{"id":"${randomUUID()}","event":"order.created","subscription":{"id":"sub_1"},"data":${nested}}`),
    signatureHeaders: ['x-momo-signature'],
    at: (secret, ts) => sign.automation(secret, automation.body(randomUUID()), ts),
  },
  {
    type: 'standard-webhooks',
    valid: (secret, padding = 0) => {
      const body = JSON.stringify({ type: 'invoice.paid', timestamp: new Date().toISOString(), data: { invoice: randomUUID(), ...pad(padding) } });
      return { cb: sign.standard(secret, body), eventType: 'invoice.paid', endpoints: ['all', 'invoices'] };
    },
    malformedJson: (secret) => sign.standard(secret, '{"type":"invoice.paid","data":'),
    missingField: (secret) => [sign.standard(secret, JSON.stringify({ data: { invoice: 'i1' } }))], // no type
    nulField: (secret) => sign.standard(secret, JSON.stringify({ type: 'invoice.\u0000paid', data: {} })),
    carrying: (secret, nested) => sign.standard(secret, `{"type":"invoice.paid","data":${nested}}`),
    signatureHeaders: ['webhook-id', 'webhook-timestamp', 'webhook-signature'],
    at: (secret, ts) => sign.standard(secret, JSON.stringify({ type: 'invoice.paid', data: { n: randomUUID() } }), undefined, ts),
  },
];

/**
 * The server compares whole unix seconds. A timestamp computed at x.95 s and checked at (x+1).01 s
 * is one second closer than intended, which would let "301 s in the future" pass as 300 s; starting
 * early in a second keeps the test's second and the server's the same.
 */
async function earlyInSecond(): Promise<void> {
  const ms = Date.now() % 1000;
  if (ms > 500) await new Promise((r) => setTimeout(r, 1000 - ms + 5));
}

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api', env: { MAX_BODY_BYTES: String(MAX_BODY_BYTES) } });
  tenant = await t.createTenant('intake');
  // Never contacted (no dispatcher in this process); only their filters matter here.
  const url = 'http://127.0.0.1:9/hook';
  endpoints.all = await createEndpoint(tenant, url);
  endpoints.orders = await createEndpoint(tenant, url, ['order.*']);
  endpoints.messages = await createEndpoint(tenant, url, ['message.status']);
  endpoints.invoices = await createEndpoint(tenant, url, ['invoice.paid']);
  endpoints.never = await createEndpoint(tenant, url, ['nothing.matches', 'order']);
  sources['momo-communication'] = await createSource(tenant, 'momo-communication');
  sources['momo-automation'] = await createSource(tenant, 'momo-automation');
  sources['standard-webhooks'] = await createSource(tenant, 'standard-webhooks', SPEC_VECTOR.secret);
});
afterAll(async () => {
  await t?.stop();
});

describe.each(kinds)('$type', (kind) => {
  const source = () => sources[kind.type];

  /** Posts a callback that must be rejected, and proves it left no row behind. */
  async function rejected(cb: Callback, status: number, code: string): Promise<void> {
    const before = await storedFor(t.platform.db, source().id);
    expectError(await postCallback(t, source().id, cb), status, code);
    expect(await storedFor(t.platform.db, source().id)).toEqual(before);
  }

  it('accepts a valid signature: one receipt, one event, one pending delivery per matching endpoint', async () => {
    const before = await storedFor(t.platform.db, source().id);
    const { cb, eventType, endpoints: matching } = kind.valid(source().secret);
    const { receiptId, eventId } = expectOutcome(await postCallback(t, source().id, cb), 'accepted');

    const rows = await rowsOfEvent(t.platform.db, eventId);
    expect(rows.event).toMatchObject({ id: eventId, type: eventType, source_id: source().id, stale: false });
    expect(rows.receipts).toEqual([{ id: receiptId, outcome: 'accepted' }]);
    // `never` filters on `order` (no `.*`) and unrelated types: neither is a match.
    const expected = matching.map((name) => ({ endpoint_id: endpoints[name], status: 'pending', dead_reason: null }));
    expect(rows.deliveries).toEqual(expected.sort((a, b) => a.endpoint_id.localeCompare(b.endpoint_id)));
    const after = await storedFor(t.platform.db, source().id);
    expect(after.receipts - before.receipts).toBe(1);
    expect(after.events - before.events).toBe(1);
    expect(after.deliveries - before.deliveries).toBe(matching.length);

    // The event is visible to the tenant through the API with its receipt count and deliveries.
    const event = await tenant.call('GET', `/v1/events/${eventId}`);
    expect(event.status).toBe(200);
    expect(event.body).toMatchObject({ id: eventId, type: eventType, receiptCount: 1 });
    expect(event.body.deliveries.map((d: { endpointId: string; status: string }) => [d.endpointId, d.status]).sort()).toEqual(
      matching.map((name) => [endpoints[name], 'pending']).sort(),
    );
  });

  it('rejects a body changed by one byte with 401 and stores nothing', async () => {
    const { cb } = kind.valid(source().secret);
    await rejected({ ...cb, rawBody: flipOneByte(String(cb.rawBody)) }, 401, 'bad_signature');
    // The untouched original still passes: the rejection was the byte, not the signer.
    expectOutcome(await postCallback(t, source().id, cb), 'accepted');
  });

  it('rejects a signature made with another secret', async () => {
    const other = kind.type === 'standard-webhooks' ? 'whsec_' + Buffer.alloc(24, 7).toString('base64') : 'not-the-secret';
    await rejected(kind.valid(other).cb, 401, 'bad_signature');
  });

  it('rejects a missing signature header with 401', async () => {
    for (const name of kind.signatureHeaders) {
      await rejected(withoutHeader(kind.valid(source().secret).cb, name), 401, 'missing_signature');
    }
  });

  it('answers malformed JSON with a valid signature with 400 malformed_json', async () => {
    await rejected(kind.malformedJson(source().secret), 400, 'malformed_json');
  });

  it('answers a signed body without a required field with 400 missing_field', async () => {
    for (const cb of kind.missingField(source().secret)) await rejected(cb, 400, 'missing_field');
  });

  it('answers a signed id or type containing NUL with 400 invalid_field, never 500', async () => {
    await rejected(kind.nulField(source().secret), 400, 'invalid_field');
  });

  it('answers a signed body nested 10,000 deep with 400 invalid_field, never 500; 100 deep is fine', async () => {
    // 20 kB, well under the size limit: depth, not size, is what broke storing it.
    const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
    await rejected(kind.carrying(source().secret, nested(10_000)), 400, 'invalid_field');
    expectOutcome(await postCallback(t, source().id, kind.carrying(source().secret, nested(100))), 'accepted');
  });

  it(`answers a body over MAX_BODY_BYTES with 413 and accepts one just under it`, async () => {
    const small = kind.valid(source().secret).cb;
    const room = MAX_BODY_BYTES - Buffer.byteLength(small.rawBody);
    await rejected(kind.valid(source().secret, room + 200).cb, 413, 'payload_too_large');
    const under = kind.valid(source().secret, room - 50).cb;
    expect(Buffer.byteLength(under.rawBody)).toBeLessThanOrEqual(MAX_BODY_BYTES);
    expectOutcome(await postCallback(t, source().id, under), 'accepted');
  });

  if (kind.at) {
    const at = kind.at;
    it('rejects a timestamp 301 s old or 301 s ahead, and accepts 299 s either way', async () => {
      await rejected(at(source().secret, nowSeconds() - 301), 401, 'timestamp_out_of_range');
      await earlyInSecond();
      await rejected(at(source().secret, nowSeconds() + 301), 401, 'timestamp_out_of_range');
      expectOutcome(await postCallback(t, source().id, at(source().secret, nowSeconds() - 299)), 'accepted');
      expectOutcome(await postCallback(t, source().id, at(source().secret, nowSeconds() + 299)), 'accepted');
    });
  }
});

describe('signature hex case', () => {
  it('momo-communication rejects a sha256=-prefixed signature of the right body', async () => {
    const source = sources['momo-communication'];
    const body = communication.messageStatus(`m-${randomUUID()}`, 'sent');
    const hex = communication.headers(source.secret, body)['x-signature'];
    const before = await storedFor(t.platform.db, source.id);
    const res = await postCallback(t, source.id, { rawBody: body, headers: { 'content-type': 'application/json', 'x-signature': `sha256=${hex}` } });
    expectError(res, 401, 'bad_signature');
    expect(await storedFor(t.platform.db, source.id)).toEqual(before);
  });

  it('momo-communication accepts the HMAC in uppercase or mixed-case hex, and still refuses another body', async () => {
    const source = sources['momo-communication'];
    for (const recase of [(hex: string) => hex.toUpperCase(), (hex: string) => hex.slice(0, 32).toUpperCase() + hex.slice(32)]) {
      const body = communication.messageStatus(`m-${randomUUID()}`, 'sent');
      const signature = recase(communication.headers(source.secret, body)['x-signature']);
      expect(signature).toMatch(/[A-F]/);
      const res = await postCallback(t, source.id, { rawBody: body, headers: { 'content-type': 'application/json', 'x-signature': signature } });
      const { eventId } = expectOutcome(res, 'accepted');
      const rows = await rowsOfEvent(t.platform.db, eventId);
      expect({ type: rows.event?.type, receipts: rows.receipts.length }).toEqual({ type: 'message.status', receipts: 1 });
      const before = await storedFor(t.platform.db, source.id);
      const other = communication.messageStatus(`m-${randomUUID()}`, 'sent');
      expectError(await postCallback(t, source.id, { rawBody: other, headers: { 'content-type': 'application/json', 'x-signature': signature } }), 401, 'bad_signature');
      expect(await storedFor(t.platform.db, source.id)).toEqual(before);
    }
  });

  it('momo-automation accepts the v1 HMAC in uppercase hex', async () => {
    const source = sources['momo-automation'];
    const body = automation.body(randomUUID());
    const header = automation.headers(source.secret, body)['x-momo-signature'];
    const upper = header.replace(/v1=([0-9a-f]+)/, (_m, hex: string) => `v1=${hex.toUpperCase()}`);
    expect(upper).not.toBe(header);
    expectOutcome(await postCallback(t, source.id, { rawBody: body, headers: { 'content-type': 'application/json', 'x-momo-signature': upper } }), 'accepted');
  });
});

describe('momo-automation ordering hints', () => {
  it('keeps a whole sequence and ignores one that is fractional or too large, instead of failing with 500', async () => {
    const source = sources['momo-automation'];
    const cases: Array<[Record<string, unknown>, number | null]> = [
      [{ sequence: 42 }, 42],
      [{ sequence: 1.5 }, null],
      [{ sequence: 1e20 }, null],
      [{ sequence: 2.5, subject: { id: 'ord_1', version: 3 } }, 3],
    ];
    for (const [extra, stored] of cases) {
      const body = JSON.stringify({ id: randomUUID(), event: 'order.created', subscription: { id: 'sub_1' }, data: {}, ...extra });
      const { eventId } = expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, body)), 'accepted');
      // Stored under the uuid the event's TypeID encodes.
      const row = await t.platform.db('events').where({ id: uuidOf('event', eventId) }).first('provider_sequence');
      expect(row, JSON.stringify(extra)).toEqual({ provider_sequence: stored });
    }
  });
});

describe('requests that are wrong before any signature is looked at', () => {
  it('answers 404 not_found for an id that does not exist or is not a source id', async () => {
    const { cb } = kinds[0]!.valid(sources['momo-communication'].secret);
    for (const id of ['src_01jabcdefghjkmnpqrstvwxyz0', 'src_00000000000000000000000000', 'nope', 'evt_01jabcdefghjkmnpqrstvwxyz0']) {
      expectError(await postCallback(t, id, cb), 404, 'not_found');
    }
  });

  it('answers a broken %-escape in the path with 400, not a 503 that blames storage', async () => {
    const { cb } = kinds[0]!.valid(sources['momo-communication'].secret);
    for (const id of ['%E0%A4%A', '%']) expectError(await postCallback(t, id, cb), 400, 'bad_request');
  });

  it('answers a body whose content-encoding cannot be decoded with 400 and stores nothing', async () => {
    const source = sources['momo-communication'];
    const { cb } = kinds[0]!.valid(source.secret);
    const before = await storedFor(t.platform.db, source.id);
    for (const encoding of ['gzip', 'deflate', 'br']) {
      const res = await postCallback(t, source.id, { rawBody: cb.rawBody, headers: { ...cb.headers, 'content-encoding': encoding } });
      expectError(res, 400, 'bad_request');
    }
    expectError(await postCallback(t, source.id, { rawBody: cb.rawBody, headers: { ...cb.headers, 'content-encoding': 'x-custom' } }), 415, 'unsupported_encoding');
    expect(await storedFor(t.platform.db, source.id)).toEqual(before);
  });
});

describe('Standard Webhooks specification vector', () => {
  const vectorHeaders = (ts: number, signature: string) => ({
    'content-type': 'application/json',
    'webhook-id': SPEC_VECTOR.id,
    'webhook-timestamp': String(ts),
    'webhook-signature': signature,
  });

  it('rejects the vector as sent in 2021 for its age, not for its signature', async () => {
    // The vector's HMAC itself is proven in test/unit/signing.test.ts; recomputed here so this file
    // stands on its own: the rejection below can only be the timestamp.
    expect(signStandardWebhook(SPEC_VECTOR.secret, SPEC_VECTOR.id, SPEC_VECTOR.timestamp, SPEC_VECTOR.body)).toBe(SPEC_VECTOR.signature);
    const source = sources['standard-webhooks'];
    const before = await storedFor(t.platform.db, source.id);
    const res = await postCallback(t, source.id, { rawBody: SPEC_VECTOR.body, headers: vectorHeaders(SPEC_VECTOR.timestamp, SPEC_VECTOR.signature) });
    expectError(res, 401, 'timestamp_out_of_range');
    expect(await storedFor(t.platform.db, source.id)).toEqual(before);
  });

  it('verifies the vector re-signed now with the spec secret, and accepts a fresh event', async () => {
    const source = sources['standard-webhooks'];
    const ts = nowSeconds();
    // Same secret, id and bytes, current time: the signature passes, and the body (which has no
    // `type`) is then refused as a payload, 400 rather than 401.
    const resigned = signStandardWebhook(SPEC_VECTOR.secret, SPEC_VECTOR.id, ts, SPEC_VECTOR.body);
    expectError(await postCallback(t, source.id, { rawBody: SPEC_VECTOR.body, headers: vectorHeaders(ts, resigned) }), 400, 'missing_field');
    // One space more in the body: the same signature no longer matches.
    expectError(await postCallback(t, source.id, { rawBody: SPEC_VECTOR.body.replace(' ', '  '), headers: vectorHeaders(ts, resigned) }), 401, 'bad_signature');

    const body = '{"type": "test.vector", "data": {"test": 2432232314}}';
    const signature = signStandardWebhook(SPEC_VECTOR.secret, SPEC_VECTOR.id, ts, body);
    const { eventId } = expectOutcome(await postCallback(t, source.id, { rawBody: body, headers: vectorHeaders(ts, signature) }), 'accepted');
    const rows = await rowsOfEvent(t.platform.db, eventId);
    expect(rows.event).toMatchObject({ type: 'test.vector', source_id: source.id });
    // `test.vector` matches only the catch-all endpoint.
    expect(rows.deliveries).toEqual([{ endpoint_id: endpoints.all, status: 'pending', dead_reason: null }]);
  });
});
