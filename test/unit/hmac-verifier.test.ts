import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hmacConfigProblems, signedContentParts } from '../../src/domain/hmac-source.js';
import { configuredHmac, verifyHmac, schemeOf } from '../../src/inbound/adapters/hmac.js';
import { github } from '../../src/inbound/adapters/github.js';
import { shopify } from '../../src/inbound/adapters/shopify.js';
import { stripe } from '../../src/inbound/adapters/stripe.js';
import { githubPush, presets, shopifyOrder, stripeEvent } from '../helpers/provider-presets.js';

const NOW = new Date('2026-12-02T12:00:00Z');
const T = Math.floor(NOW.getTime() / 1000);
const SECRET = 'unit-test-secret-0123456789';
const request = (rawBody: string | Buffer, headers: Record<string, string>, now = NOW) => ({ rawBody: Buffer.from(rawBody), headers, now });

describe('verifyHmac', () => {
  const base = { header: 'X-Sig', algorithm: 'sha256', encoding: 'hex', signedContent: '{body}' } as const;
  const mac = (algorithm: string, data: Buffer | string, encoding: 'hex' | 'base64') => createHmac(algorithm, SECRET).update(data).digest(encoding);

  it.each([
    ['sha1', 'hex'],
    ['sha256', 'base64'],
    ['sha512', 'hex'],
  ] as const)('checks %s digests written in %s', (algorithm, encoding) => {
    const scheme = schemeOf({ ...base, algorithm, encoding });
    const body = '{"type":"a"}';
    expect(verifyHmac(scheme, request(body, { 'x-sig': mac(algorithm, body, encoding) }), SECRET)).toEqual({ ok: true });
    expect(verifyHmac(scheme, request(body, { 'x-sig': mac(algorithm, `${body} `, encoding) }), SECRET)).toMatchObject({ ok: false, reason: 'bad_signature' });
    expect(verifyHmac(scheme, request(body, {}), SECRET)).toMatchObject({ ok: false, reason: 'missing_signature' });
  });

  it('signs the exact bytes, even ones that are not valid UTF-8', () => {
    const body = Buffer.from([0x7b, 0xff, 0xfe, 0x7d]);
    const scheme = schemeOf({ ...base, prefix: 'sha256=' });
    expect(verifyHmac(scheme, { rawBody: body, headers: { 'x-sig': `sha256=${mac('sha256', body, 'hex')}` }, now: NOW }, SECRET)).toEqual({ ok: true });
    // Decoding and re-encoding would have replaced the invalid bytes: a different digest.
    const reencoded = Buffer.from(body.toString('utf8'), 'utf8');
    expect(verifyHmac(scheme, { rawBody: body, headers: { 'x-sig': `sha256=${mac('sha256', reencoded, 'hex')}` }, now: NOW }, SECRET).ok).toBe(false);
    expect(verifyHmac(scheme, { rawBody: body, headers: { 'x-sig': mac('sha256', body, 'hex') }, now: NOW }, SECRET)).toMatchObject({ reason: 'bad_signature' });
  });

  it('checks a timestamp header against the tolerance and signs the template around it', () => {
    const scheme = schemeOf({ ...base, timestampHeader: 'X-Time', toleranceSeconds: 60, signedContent: 'v0:{timestamp}:{body}' });
    const body = '{}';
    const at = (t: number) => request(body, { 'x-sig': mac('sha256', `v0:${t}:${body}`, 'hex'), 'x-time': String(t) });
    expect(verifyHmac(scheme, at(T - 60), SECRET)).toEqual({ ok: true });
    expect(verifyHmac(scheme, at(T - 61), SECRET)).toMatchObject({ reason: 'timestamp_out_of_range' });
    expect(verifyHmac(scheme, at(T + 61), SECRET)).toMatchObject({ reason: 'timestamp_out_of_range' });
    expect(verifyHmac(scheme, request(body, { 'x-sig': mac('sha256', body, 'hex') }), SECRET)).toMatchObject({ reason: 'missing_signature' });
  });

  it('never accepts an empty secret', () => {
    const scheme = schemeOf(base);
    const body = '{}';
    expect(verifyHmac(scheme, request(body, { 'x-sig': createHmac('sha256', '').update(body).digest('hex') }), '')).toMatchObject({ ok: false });
  });
});

describe('presets, signed by the providers\' libraries', () => {
  it('stripe: any v1 matches, the body id and type are the event, data.object.id the message', () => {
    const body = stripeEvent('evt_1', 'invoice.paid', 'in_9');
    const cb = presets.stripe(['whsec_other_secret_012345678', SECRET], body, T);
    expect(stripe.verify(request(body, cb.headers), SECRET)).toEqual({ ok: true });
    expect(stripe.verify(request(body, presets.stripe(SECRET, body, T - 301).headers), SECRET)).toMatchObject({ reason: 'timestamp_out_of_range' });
    const parsed = stripe.parse(request(body, cb.headers));
    expect(parsed).toMatchObject({ ok: true, event: { type: 'invoice.paid', dedupeKey: 'evt_1', messageId: 'in_9' } });
  });

  it('github: sha256= prefix; the delivery id and event header are the event', async () => {
    const body = githubPush();
    const cb = await presets.github(SECRET, body, 'guid-1', 'push');
    expect(github.verify(request(body, cb.headers), SECRET)).toEqual({ ok: true });
    expect(github.parse(request(body, cb.headers))).toMatchObject({ ok: true, event: { type: 'push', dedupeKey: 'guid-1' } });
    expect(github.parse(request(body, { ...cb.headers, 'x-github-delivery': '' }))).toMatchObject({ ok: false, code: 'missing_field' });
    // The same body under another delivery id is another event, so a repeat must fold the id in.
    expect(github.repeatDigest!(request(body, cb.headers))).not.toBe(github.repeatDigest!(request(body, { ...cb.headers, 'x-github-delivery': 'guid-2' })));
  });

  it('shopify: base64 of the body; the topic becomes a dotted type', () => {
    const body = shopifyOrder(7);
    const cb = presets.shopify(SECRET, body, 'wh-1', 'orders/create');
    expect(shopify.verify(request(body, cb.headers), SECRET)).toEqual({ ok: true });
    expect(shopify.parse(request(body, cb.headers))).toMatchObject({ ok: true, event: { type: 'orders.create', dedupeKey: 'wh-1' } });
  });
});

describe('hmac source configuration', () => {
  it('splits the signed-content template into bytes to write and placeholders', () => {
    expect(signedContentParts('{timestamp}.{body}')).toEqual([{ placeholder: 'timestamp' }, { text: '.' }, { placeholder: 'body' }]);
    expect(signedContentParts('{id}.{x}.{body}')).toEqual([{ placeholder: 'id' }, { text: '.' }, { text: '{x}' }, { text: '.' }, { placeholder: 'body' }]);
  });

  it.each([
    [{ signedContent: '{body}' }, []],
    [{ signedContent: '{timestamp}.{body}', timestampHeader: 'x-t' }, []],
    [{ signedContent: '{timestamp}' }, ['signedContent', 'timestampHeader']],
    [{ signedContent: '{body}{body}' }, ['signedContent']],
    [{ signedContent: '{id}.{body}', toleranceSeconds: 5 }, ['idHeader', 'toleranceSeconds']],
    [{ signedContent: '{body}', typeHeader: 'x-e', typeField: 'kind' }, ['typeField']],
    [{ signedContent: '{payload}' }, ['signedContent', 'signedContent']],
  ])('%j → problems at %j', (config, paths) => {
    expect(hmacConfigProblems({ header: 'x-sig', algorithm: 'sha256', encoding: 'hex', ...config }).map((p) => p.path)).toEqual(paths);
  });

  it('takes the id and type from the configured headers, or the type from a body field', () => {
    const withHeaders = configuredHmac({ header: 'x-sig', algorithm: 'sha256', encoding: 'hex', signedContent: '{body}', idHeader: 'X-Id', typeHeader: 'X-Event' });
    expect(withHeaders.parse(request('{}', { 'x-id': 'd1', 'x-event': 'a.b' }))).toMatchObject({ ok: true, event: { type: 'a.b', dedupeKey: 'd1' } });
    expect(withHeaders.parse(request('{}', { 'x-event': 'a.b' }))).toMatchObject({ ok: false, code: 'missing_field' });
    const fromBody = configuredHmac({ header: 'x-sig', algorithm: 'sha256', encoding: 'hex', signedContent: '{body}', typeField: 'kind' });
    const a = fromBody.parse(request('{"kind":"k","n":1}', {}));
    const b = fromBody.parse(request('{ "n": 1, "kind": "k" }', {}));
    expect(a).toMatchObject({ ok: true, event: { type: 'k' } });
    // Without an id header the content is the identity: the same JSON content is the same event.
    expect(a.ok && b.ok && a.event.dedupeKey === b.event.dedupeKey).toBe(true);
  });

  it('without an id header, a type header still tells equal bodies apart', () => {
    const adapter = configuredHmac({ header: 'x-sig', algorithm: 'sha256', encoding: 'hex', signedContent: '{body}', typeHeader: 'X-Event' });
    const created = request('{"n":1}', { 'x-event': 'a.created' });
    const deleted = request('{"n":1}', { 'x-event': 'a.deleted' });
    const keys = [adapter.parse(created), adapter.parse(deleted)].map((r) => (r.ok ? r.event.dedupeKey : r.code));
    expect(keys[0]).not.toBe(keys[1]);
    expect(adapter.repeatDigest!(created)).not.toBe(adapter.repeatDigest!(deleted));
  });
});
