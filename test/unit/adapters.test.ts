import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { InboundRequest } from '../../src/inbound/adapter.js';
import { SOURCE_TYPES } from '../../src/domain/sources.js';
import { adapters, getAdapter, isSourceType } from '../../src/inbound/adapters/index.js';
import { fallbackDedupeKey } from '../../src/domain/dedupe.js';
import { RawJson } from '../../src/domain/raw-json.js';
import { decodeWebhookSecret, hmacSha256Hex, signStandardWebhook } from '../../src/domain/signing.js';

const NOW = new Date('2026-11-29T10:00:00.500Z');
const NOW_S = Math.floor(NOW.getTime() / 1000);
const HEX_SECRET = 'momo-secret-ü';
const WHSEC = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

function request(body: string | Buffer, headers: Record<string, string | undefined>, now = NOW): InboundRequest {
  return { rawBody: Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'), headers, now };
}

const communication = adapters['momo-communication'];
const automation = adapters['momo-automation'];
const standard = adapters['standard-webhooks'];

function signedCommunication(body: string | object, secret = HEX_SECRET): InboundRequest {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  return request(raw, { 'x-signature': hmacSha256Hex(secret, Buffer.from(raw)) });
}

function automationHeader(raw: string, t: number | string = NOW_S, secret = HEX_SECRET): string {
  return `t=${t},v1=${hmacSha256Hex(secret, Buffer.from(`${t}.${raw}`))}`;
}

function signedAutomation(body: string | object, t: number = NOW_S): InboundRequest {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  return request(raw, { 'x-momo-signature': automationHeader(raw, t) });
}

function signedStandard(body: string | object, t: number = NOW_S, id = 'msg_1'): InboundRequest {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  return request(raw, {
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': signStandardWebhook(WHSEC, id, t, raw),
  });
}

function parsed(result: ReturnType<typeof communication.parse>) {
  if (!result.ok) throw new Error(`expected a parsed event, got ${result.code}: ${result.message}`);
  return result.event;
}

describe('registry', () => {
  it('lists every source type of the contract, each served by its own adapter', () => {
    expect([...SOURCE_TYPES].sort()).toEqual(['github', 'hmac', 'momo-automation', 'momo-communication', 'shopify', 'standard-webhooks', 'stripe']);
    for (const type of SOURCE_TYPES) expect(getAdapter(type).type).toBe(type);
    expect(isSourceType('momo-automation')).toBe(true);
    expect(isSourceType('toString')).toBe(false);
  });

  it('generates secrets in each provider format', () => {
    expect(communication.generateSecret()).toMatch(/^[0-9a-f]{64}$/);
    expect(automation.generateSecret()).toMatch(/^[0-9a-f]{64}$/);
    expect(decodeWebhookSecret(standard.generateSecret()).length).toBeGreaterThanOrEqual(24);
    expect(standard.generateSecret()).toMatch(/^whsec_/);
  });
});

describe('momo-communication verify', () => {
  const body = '{"event":"message.status","message_id":"m1","status":"delivered","timestamp":"2026-11-29T10:00:00Z"}';
  const good = hmacSha256Hex(HEX_SECRET, Buffer.from(body));

  it.each([
    ['the lowercase hex HMAC of the raw body', good, body, { ok: true }],
    ['a body changed by one byte', good, body.replace('m1', 'm2'), { ok: false, reason: 'bad_signature' }],
    ['a sha256= prefix', `sha256=${good}`, body, { ok: false, reason: 'bad_signature' }],
    ['uppercase hex of the same HMAC (.NET Convert.ToHexString)', good.toUpperCase(), body, { ok: true }],
    ['mixed-case hex of the same HMAC', good.slice(0, 10).toUpperCase() + good.slice(10), body, { ok: true }],
    ['uppercase hex of another body', hmacSha256Hex(HEX_SECRET, Buffer.from(body.replace('m1', 'm2'))).toUpperCase(), body, { ok: false, reason: 'bad_signature' }],
    ['a signature made with another secret', hmacSha256Hex('other', Buffer.from(body)), body, { ok: false, reason: 'bad_signature' }],
    ['a truncated signature', good.slice(0, 63), body, { ok: false, reason: 'bad_signature' }],
    ['no header', undefined, body, { ok: false, reason: 'missing_signature' }],
    ['a blank header', '  ', body, { ok: false, reason: 'missing_signature' }],
  ])('%s', (_name, signature, raw, expected) => {
    expect(communication.verify(request(raw, { 'x-signature': signature }), HEX_SECRET)).toMatchObject(expected);
  });

  it('checks the exact raw bytes, not re-encoded JSON', () => {
    const spaced = '{ "event" : "message.status", "message_id" : "m1", "status" : "sent" }';
    const signature = hmacSha256Hex(HEX_SECRET, Buffer.from(spaced));
    expect(communication.verify(request(spaced, { 'x-signature': signature }), HEX_SECRET)).toEqual({ ok: true });
    const reencoded = JSON.stringify(JSON.parse(spaced));
    expect(communication.verify(request(reencoded, { 'x-signature': signature }), HEX_SECRET).ok).toBe(false);
  });

  it('refuses to verify against an empty secret, since anyone can compute that HMAC', () => {
    const forged = request(body, { 'x-signature': hmacSha256Hex('', Buffer.from(body)) });
    expect(communication.verify(forged, '')).toMatchObject({ ok: false, reason: 'bad_signature' });
  });
});

describe('momo-communication parse', () => {
  const message = { event: 'message.status', message_id: 'm1', status: 'delivered', timestamp: '2026-11-29T10:00:00Z' };

  it('parses a message status event', () => {
    expect(parsed(communication.parse(signedCommunication(message)))).toEqual({
      type: 'message.status',
      dedupeKey: 'message:m1:delivered',
      messageId: 'm1',
      status: { value: 'delivered', rank: 3, final: true },
      data: RawJson.of(message),
    });
  });

  it('gives the same key to the same message status with a new callback timestamp', () => {
    const first = parsed(communication.parse(signedCommunication(message)));
    const again = parsed(communication.parse(signedCommunication({ ...message, timestamp: '2026-11-29T10:07:00Z' })));
    expect(again.dedupeKey).toBe(first.dedupeKey);
    const next = parsed(communication.parse(signedCommunication({ ...message, status: 'sent' })));
    expect(next.dedupeKey).toBe('message:m1:sent');
    expect(next.status).toEqual({ value: 'sent', rank: 2, final: false });
  });

  it.each([
    ['an order status event', { event: 'order.updated', order_id: 'o1', status: 'paid' }, 'order:o1:paid', 'o1'],
    ['an order event without status', { event: 'order.created', order_id: 'o1' }, 'order:o1:order.created', 'o1'],
    ['a group event', { event: 'group.member_added', group_id: 'g1' }, 'group:g1:group.member_added', 'g1'],
    ['a message event without status', { event: 'message.clicked', message_id: 'm1' }, 'message:m1:message.clicked', 'm1'],
    ['an order event that also names a message', { event: 'order.updated', order_id: 'o1', message_id: 'm9', status: 'paid' }, 'order:o1:paid', 'o1'],
    ['ids containing the separator', { event: 'order.updated', order_id: 'o:1', status: 'a' }, 'order:o%3A1:a', 'o:1'],
  ])('keys %s by resource and transition', (_name, body, dedupeKey, messageId) => {
    const event = parsed(communication.parse(signedCommunication(body)));
    expect(event).toMatchObject({ type: body.event, dedupeKey, messageId, data: RawJson.of(body) });
    expect(event.status).toBeUndefined();
  });

  it('falls back to a digest of the body without volatile fields when no resource id is present', () => {
    const body = { event: 'account.updated', account: 'a1', timestamp: '2026-11-29T10:00:00Z' };
    const event = parsed(communication.parse(signedCommunication(body)));
    expect(event.dedupeKey).toBe(fallbackDedupeKey({ event: 'account.updated', account: 'a1' }, []));
    expect(event.messageId).toBeUndefined();
    const later = parsed(communication.parse(signedCommunication({ ...body, timestamp: '2026-11-29T11:00:00Z', updated_at: 'x' })));
    expect(later.dedupeKey).toBe(event.dedupeKey);
    const changed = parsed(communication.parse(signedCommunication({ ...body, account: 'a2' })));
    expect(changed.dedupeKey).not.toBe(event.dedupeKey);
  });

  it.each([
    ['malformed JSON', '{"event":"message.status",', 'malformed_json'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0x7d]), 'malformed_json'],
    ['an empty body', '', 'malformed_json'],
    ['a JSON array', '[1,2]', 'invalid_field'],
    ['JSON null', 'null', 'invalid_field'],
    ['a JSON string', '"message"', 'invalid_field'],
    ['no event', '{"message_id":"m1","status":"sent"}', 'missing_field'],
    ['a null event', '{"event":null,"message_id":"m1"}', 'missing_field'],
    ['a numeric event', '{"event":5,"message_id":"m1"}', 'invalid_field'],
    ['an empty event', '{"event":"","message_id":"m1"}', 'invalid_field'],
    ['a numeric message_id', '{"event":"message.status","message_id":1,"status":"sent"}', 'invalid_field'],
    ['an object message_id', '{"event":"message.status","message_id":{"id":"m1"},"status":"sent"}', 'invalid_field'],
    ['an array order_id', '{"event":"order.created","order_id":["o1"]}', 'invalid_field'],
    ['an unknown message status', '{"event":"message.status","message_id":"m1","status":"exploded"}', 'invalid_field'],
    ['a numeric status', '{"event":"message.status","message_id":"m1","status":3}', 'invalid_field'],
    ['message.status without status', '{"event":"message.status","message_id":"m1"}', 'missing_field'],
    ['an overlong message_id', JSON.stringify({ event: 'message.status', message_id: 'm'.repeat(256), status: 'sent' }), 'invalid_field'],
  ])('rejects a validly signed body with %s', (_name, raw, code) => {
    const req = request(raw, { 'x-signature': hmacSha256Hex(HEX_SECRET, Buffer.from(raw)) });
    expect(communication.verify(req, HEX_SECRET)).toEqual({ ok: true });
    expect(communication.parse(req)).toMatchObject({ ok: false, code });
  });
});

describe('momo-automation verify', () => {
  const body = JSON.stringify({ id: 'e1', event: 'order.created', subscription: { id: 'sub_1' }, data: {} });
  const signature = hmacSha256Hex(HEX_SECRET, Buffer.from(`${NOW_S}.${body}`));
  const otherSignature = hmacSha256Hex('other', Buffer.from(`${NOW_S}.${body}`));

  it.each([
    ['a valid header', automationHeader(body), body, { ok: true }],
    ['spaces around the parts', ` t = ${NOW_S} ,  v1 = ${signature} `, body, { ok: true }],
    ['parts in another order', `v1=${signature},t=${NOW_S}`, body, { ok: true }],
    ['several v1 values, one matching', `t=${NOW_S},v1=${otherSignature},v1=${signature}`, body, { ok: true }],
    ['unknown extra parts', `t=${NOW_S},v0=abc,v1=${signature}`, body, { ok: true }],
    ['a timestamp 299 s old', automationHeader(body, NOW_S - 299), body, { ok: true }],
    ['a timestamp 300 s in the future', automationHeader(body, NOW_S + 300), body, { ok: true }],
    ['a body changed by one byte', automationHeader(body), body.replace('e1', 'e2'), { ok: false, reason: 'bad_signature' }],
    ['only a non-matching v1', `t=${NOW_S},v1=${otherSignature}`, body, { ok: false, reason: 'bad_signature' }],
    ['uppercase hex of the same HMAC', `t=${NOW_S},v1=${signature.toUpperCase()}`, body, { ok: true }],
    ['uppercase hex of another HMAC', `t=${NOW_S},v1=${otherSignature.toUpperCase()}`, body, { ok: false, reason: 'bad_signature' }],
    ['a timestamp 301 s old', automationHeader(body, NOW_S - 301), body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['a timestamp 301 s in the future', automationHeader(body, NOW_S + 301), body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['a signed t that differs from the header t', `t=${NOW_S + 1},v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['no v1', `t=${NOW_S}`, body, { ok: false, reason: 'bad_signature' }],
    ['no t', `v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['two t values', `t=${NOW_S},t=${NOW_S},v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['a negative t', `t=-${NOW_S},v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['a fractional t', `t=${NOW_S}.5,v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['a non-numeric t', `t=now,v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['t in exponent form', `t=1.7e9,v1=${signature}`, body, { ok: false, reason: 'bad_signature' }],
    ['a huge t', `t=${'9'.repeat(400)},v1=${signature}`, body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['t = 0', `t=0,v1=${signature}`, body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['the bare hex without t=', signature, body, { ok: false, reason: 'bad_signature' }],
    ['no header', undefined, body, { ok: false, reason: 'missing_signature' }],
  ])('%s', (_name, header, raw, expected) => {
    expect(automation.verify(request(raw, { 'x-momo-signature': header }), HEX_SECRET)).toMatchObject(expected);
  });

  it('rejects everything when the clock value is invalid rather than accepting any timestamp', () => {
    const req = request(body, { 'x-momo-signature': automationHeader(body) }, new Date(Number.NaN));
    expect(automation.verify(req, HEX_SECRET)).toMatchObject({ ok: false, reason: 'timestamp_out_of_range' });
  });
});

describe('momo-automation parse', () => {
  const body = {
    id: '3f1c2a9e-0b7d-4a58-9d1e-2c4b6f8a0e11',
    event: 'order.created',
    subject: { type: 'order', id: 'ord_42' },
    actor: { type: 'user', id: 'u1' },
    subscription: { id: 'sub_1' },
    data: { total: 1250, currency: 'EUR' },
  };

  it('parses the wrapped payload, keyed by subscription and event id', () => {
    expect(parsed(automation.parse(signedAutomation(body)))).toEqual({
      type: 'order.created',
      dedupeKey: 'sub_1:3f1c2a9e-0b7d-4a58-9d1e-2c4b6f8a0e11',
      messageId: 'ord_42',
      data: RawJson.of({ total: 1250, currency: 'EUR' }),
    });
  });

  it('gives a retried event the same key, and the same id under another subscription another key', () => {
    const first = parsed(automation.parse(signedAutomation(body)));
    const retry = parsed(automation.parse(signedAutomation(body, NOW_S + 20)));
    const other = parsed(automation.parse(signedAutomation({ ...body, subscription: { id: 'sub_2' } })));
    expect(retry.dedupeKey).toBe(first.dedupeKey);
    expect(other.dedupeKey).toBe('sub_2:3f1c2a9e-0b7d-4a58-9d1e-2c4b6f8a0e11');
  });

  it.each([
    ['a top-level sequence', { sequence: 7 }, 7],
    ['a top-level version', { version: 3 }, 3],
    ['a subject version', { subject: { id: 'ord_42', version: 5 } }, 5],
    ['top-level before subject', { sequence: 2, subject: { id: 'ord_42', sequence: 9 } }, 2],
    ['a string sequence (ignored)', { sequence: '7' }, undefined],
    ['none', {}, undefined],
  ])('takes the ordering hint from %s', (_name, extra, sequence) => {
    expect(parsed(automation.parse(signedAutomation({ ...body, ...extra }))).sequence).toBe(sequence);
  });

  it.each([
    ['no subject', { subject: undefined }],
    ['a subject with a numeric id', { subject: { id: 42 } }],
    ['a subject that is a string', { subject: 'ord_42' }],
  ])('has no messageId with %s', (_name, extra) => {
    const event = parsed(automation.parse(signedAutomation({ ...body, ...extra })));
    expect(event.messageId).toBeUndefined();
    expect(event.dedupeKey).toBe('sub_1:3f1c2a9e-0b7d-4a58-9d1e-2c4b6f8a0e11');
  });

  it('accepts null data as present', () => {
    expect(parsed(automation.parse(signedAutomation({ ...body, data: null }))).data).toEqual(new RawJson('null'));
  });

  it.each([
    ['no id', { id: undefined }, 'missing_field'],
    ['a numeric id', { id: 12 }, 'invalid_field'],
    ['no event', { event: undefined }, 'missing_field'],
    ['an object event', { event: { name: 'x' } }, 'invalid_field'],
    ['no subscription', { subscription: undefined }, 'missing_field'],
    ['a string subscription', { subscription: 'sub_1' }, 'invalid_field'],
    ['no subscription.id', { subscription: {} }, 'missing_field'],
    ['a numeric subscription.id', { subscription: { id: 1 } }, 'invalid_field'],
    ['no data', { data: undefined }, 'missing_field'],
  ])('rejects a validly signed body with %s', (_name, change, code) => {
    const req = signedAutomation({ ...body, ...change });
    expect(automation.verify(req, HEX_SECRET)).toEqual({ ok: true });
    expect(automation.parse(req)).toMatchObject({ ok: false, code });
  });

  it('reports malformed JSON that carries a valid signature', () => {
    const req = signedAutomation('{"id":"e1",');
    expect(automation.verify(req, HEX_SECRET)).toEqual({ ok: true });
    expect(automation.parse(req)).toMatchObject({ ok: false, code: 'malformed_json' });
  });
});

describe('standard-webhooks verify', () => {
  const body = '{"type":"invoice.paid","data":{"id":"in_1"}}';
  const sign = (t: number, raw = body, id = 'msg_1') => signStandardWebhook(WHSEC, id, t, raw);
  const headers = (overrides: Record<string, string | undefined> = {}) => ({
    'webhook-id': 'msg_1',
    'webhook-timestamp': String(NOW_S),
    'webhook-signature': sign(NOW_S),
    ...overrides,
  });

  it.each([
    ['valid headers', headers(), body, { ok: true }],
    ['two signatures, the second matching', headers({ 'webhook-signature': `v1,bm9wZQ== ${sign(NOW_S)}` }), body, { ok: true }],
    ['a timestamp 299 s old', headers({ 'webhook-timestamp': String(NOW_S - 299), 'webhook-signature': sign(NOW_S - 299) }), body, { ok: true }],
    ['a body changed by one byte', headers(), body.replace('in_1', 'in_2'), { ok: false, reason: 'bad_signature' }],
    ['another webhook-id', headers({ 'webhook-id': 'msg_2' }), body, { ok: false, reason: 'bad_signature' }],
    ['a timestamp 301 s old', headers({ 'webhook-timestamp': String(NOW_S - 301), 'webhook-signature': sign(NOW_S - 301) }), body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['a timestamp 301 s in the future', headers({ 'webhook-timestamp': String(NOW_S + 301), 'webhook-signature': sign(NOW_S + 301) }), body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['a non-numeric timestamp', headers({ 'webhook-timestamp': 'yesterday' }), body, { ok: false, reason: 'bad_signature' }],
    ['a huge timestamp', headers({ 'webhook-timestamp': '1'.repeat(30) }), body, { ok: false, reason: 'timestamp_out_of_range' }],
    ['a signature without version', headers({ 'webhook-signature': sign(NOW_S).slice(3) }), body, { ok: false, reason: 'bad_signature' }],
    ['no webhook-signature', headers({ 'webhook-signature': undefined }), body, { ok: false, reason: 'missing_signature' }],
    ['no webhook-id', headers({ 'webhook-id': undefined }), body, { ok: false, reason: 'missing_signature' }],
    ['no webhook-timestamp', headers({ 'webhook-timestamp': undefined }), body, { ok: false, reason: 'missing_signature' }],
  ])('%s', (_name, hdrs, raw, expected) => {
    expect(standard.verify(request(raw, hdrs), WHSEC)).toMatchObject(expected);
  });

  it('accepts the specification test vector at its own time', () => {
    const req = request('{"test": 2432232314}', {
      'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
      'webhook-timestamp': '1614265330',
      'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
    }, new Date(1614265330_000));
    expect(standard.verify(req, WHSEC)).toEqual({ ok: true });
  });
});

describe('payload as written', () => {
  // What JSON.parse + JSON.stringify would alter: digits, -0, exponents, trailing zeros, escapes, key order, spaces.
  const payload = '{ "id" : 12345678901234567890, "z": -0.0, "e": 1e400, "p": 1.10, "s": "\\u00e9\\/", "k": {"2":1,"1":2} }';

  it.each([
    ['momo-automation (its data member)', () => automation.parse(signedAutomation(`{"id":"e1","event":"order.created","subscription":{"id":"s"},"data":${payload}}`)), payload],
    ['standard-webhooks (its data member)', () => standard.parse(signedStandard(`{"type":"t","data":\n${payload}\n}`)), payload],
    ['standard-webhooks without data (the whole body)', () => standard.parse(signedStandard(`\n{"type":"t","x":${payload}} `)), `{"type":"t","x":${payload}}`],
    ['momo-communication (the whole body)', () => communication.parse(signedCommunication(` {"event":"order.created","order_id":"o1","x":${payload}}\n`)), `{"event":"order.created","order_id":"o1","x":${payload}}`],
  ])('%s is forwarded as the exact text received', (_name, parse, expected) => {
    expect(parsed(parse()).data).toEqual(new RawJson(expected));
  });
});

describe('standard-webhooks parse', () => {
  it.each([
    ['data and messageId', { type: 'invoice.paid', messageId: 'in_1', data: { amount: 5 } }, { messageId: 'in_1', data: RawJson.of({ amount: 5 }) }],
    ['message_id', { type: 'invoice.paid', message_id: 'in_2', data: 1 }, { messageId: 'in_2', data: new RawJson('1') }],
    ['no data (the whole body is data)', { type: 'ping' }, { messageId: undefined, data: RawJson.of({ type: 'ping' }) }],
    ['a numeric messageId (ignored)', { type: 'ping', messageId: 5, data: {} }, { messageId: undefined, data: new RawJson('{}') }],
  ])('parses a body with %s', (_name, body, expected) => {
    const event = parsed(standard.parse(signedStandard(body, NOW_S, 'msg_77')));
    expect(event).toEqual({ type: body.type, dedupeKey: 'msg_77', ...expected });
  });

  it('keys on webhook-id, so a retry with a new timestamp is the same event', () => {
    const first = parsed(standard.parse(signedStandard({ type: 'ping' }, NOW_S)));
    const retry = parsed(standard.parse(signedStandard({ type: 'ping' }, NOW_S + 60)));
    expect(retry.dedupeKey).toBe(first.dedupeKey);
  });

  it.each([
    ['no type', '{"data":{}}', 'missing_field'],
    ['a numeric type', '{"type":1}', 'invalid_field'],
    ['malformed JSON', '{"type":', 'malformed_json'],
    ['an array body', '[]', 'invalid_field'],
  ])('rejects a validly signed body with %s', (_name, raw, code) => {
    const req = signedStandard(raw);
    expect(standard.verify(req, WHSEC)).toEqual({ ok: true });
    expect(standard.parse(req)).toMatchObject({ ok: false, code });
  });
});

describe('hostile input (property)', () => {
  const headerNames = ['x-signature', 'x-momo-signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature'];
  const headerValue = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.constantFrom('t=1,v1=', 't=99999999999999999999999,v1=ab', 'v1,', 'v1, v1,,', '=,=,=', '-1', '1e400', 'NaN'),
    fc.bigInt().map(String),
    fc.constant(undefined),
  );
  const hostileRequest = fc.record({
    rawBody: fc.oneof(
      fc.uint8Array({ maxLength: 256 }).map((bytes) => Buffer.from(bytes)),
      fc.jsonValue().map((value) => Buffer.from(JSON.stringify(value) ?? '')),
    ),
    headers: fc.dictionary(fc.constantFrom(...headerNames), headerValue),
    now: fc.oneof(fc.date(), fc.constant(NOW), fc.constant(new Date(Number.NaN))),
  });

  it('verify and parse never throw and always answer in the contract shape', () => {
    fc.assert(
      fc.property(hostileRequest, fc.constantFrom(HEX_SECRET, WHSEC, '', 'whsec_', '%%%'), (req, secret) => {
        for (const type of SOURCE_TYPES) {
          const adapter = getAdapter(type);
          const verdict = adapter.verify(req, secret);
          expect(typeof verdict.ok).toBe('boolean');
          if (!verdict.ok) expect(['missing_signature', 'bad_signature', 'timestamp_out_of_range']).toContain(verdict.reason);
          const result = adapter.parse(req);
          if (!result.ok) expect(['malformed_json', 'missing_field', 'invalid_field']).toContain(result.code);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('parse never throws on deeply nested JSON without resource ids', () => {
    const raw = `{"event":"x","deep":${'['.repeat(50_000)}${']'.repeat(50_000)}}`;
    expect(communication.parse(signedCommunication(raw))).toMatchObject({ ok: false, code: 'invalid_field' });
  });
});
