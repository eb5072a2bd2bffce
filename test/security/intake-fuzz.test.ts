// Property-based fuzzing of the inbound route over real HTTP, for all three provider contracts.
// Every generated request is invalid by construction (no valid signature, an odd timestamp, or a
// validly signed body that breaks the contract), so the only acceptable answers are 4xx: never a
// 5xx (a crash or an unhandled input), never a 2xx (an invalid input taken as an event). Nothing
// may be stored, and the process must stay ready. Requests go over raw sockets because fetch()
// refuses the hostile headers that matter here (NUL bytes, raw UTF-8, 10 KB values).
import { createHmac, randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { messageStatus } from '../../src/domain/message-status.js';
import { decodeWebhookSecret, hmacSha256Hex } from '../../src/domain/signing.js';
import type { SourceType } from '../../src/domain/sources.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { rawExchange, rawRequest, type RawResponse } from './helpers.js';

const NUM_RUNS = 150;
const types: SourceType[] = ['momo-communication', 'momo-automation', 'standard-webhooks'];
type Headers = Array<[string, string | Buffer]>;

interface Source {
  id: string;
  type: SourceType;
  secret: string;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** The contract's signature headers over `body`; `t` and `id` are written exactly as given. */
function signed(source: Source, body: Buffer, opts: { t?: string; id?: string } = {}): Headers {
  const t = opts.t ?? String(nowSeconds());
  switch (source.type) {
    case 'momo-communication':
      return [['x-signature', hmacSha256Hex(source.secret, body)]];
    case 'momo-automation':
      return [['x-momo-signature', `t=${t},v1=${hmacSha256Hex(source.secret, Buffer.concat([Buffer.from(`${t}.`), body]))}`]];
    case 'standard-webhooks': {
      const id = opts.id ?? `msg_${randomUUID()}`;
      const mac = createHmac('sha256', decodeWebhookSecret(source.secret)).update(`${id}.${t}.`).update(body).digest('base64');
      return [
        ['webhook-id', id],
        ['webhook-timestamp', t],
        ['webhook-signature', `v1,${mac}`],
      ];
    }
    default:
      throw new Error(`no signer for ${source.type} here`);
  }
}

/** A body each contract accepts; the properties below break exactly one thing in it. */
function validBody(type: SourceType): Record<string, unknown> {
  switch (type) {
    case 'momo-communication':
      return { event: 'message.status', message_id: `m-${randomUUID()}`, status: 'sent', timestamp: new Date().toISOString() };
    case 'momo-automation':
      return { id: randomUUID(), event: 'order.created', subject: { id: `ord_${randomUUID()}` }, actor: { id: 'u1' }, subscription: { id: 'sub_1' }, data: { n: 1 } };
    case 'standard-webhooks':
      return { type: 'order.created', data: { n: 1 } };
    default:
      throw new Error(`no body for ${type} here`);
  }
}

// ---------------------------------------------------------------------------------------------
// Generators

/** Header values a hostile sender might try; CR and LF are left out only because they would end the header. */
const hostileValue: fc.Arbitrary<string | Buffer> = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 200 }).map((s) => s.replace(/[\r\n]/g, '')), // any Unicode, sent as raw UTF-8
  fc.string({ maxLength: 100 }),
  fc.string({ maxLength: 40 }).map((s) => `${s}\u0000${s}`), // NUL bytes
  fc.integer({ min: 1, max: 10 }).map((k) => 'A'.repeat(k * 1024)), // up to 10 KB
  fc.integer({ min: 2, max: 200 }).map((k) => Array.from({ length: k }, (_, i) => `t=${nowSeconds() + i}`).join(',')), // repeated t=
  fc.integer({ min: 2, max: 200 }).map((k) => `t=${nowSeconds()},${Array.from({ length: k }, () => `v1=${'0'.repeat(64)}`).join(',')}`), // v1= floods
  fc.integer({ min: 2, max: 200 }).map((k) => Array.from({ length: k }, () => `v1,${'A'.repeat(43)}=`).join(' ')), // webhook-signature floods
  fc.uint8Array({ maxLength: 100 }).map((b) => Buffer.from(b.filter((x) => x !== 13 && x !== 10))), // raw bytes
  fc.constantFrom('', ' ', ',', '=', 't=', 'v1=', 't=,v1=', 'v1,', 'sha256=', '\t', 'null', '[]', '{}'),
);

const signatureHeaderNames = ['x-signature', 'x-momo-signature', 'webhook-id', 'webhook-timestamp', 'webhook-signature'];

const hostileHeaders: fc.Arbitrary<Headers> = fc.array(fc.tuple(fc.constantFrom(...signatureHeaderNames), hostileValue), { maxLength: 6 });

/** Timestamps that must never verify: not an integer, or an integer far outside the 300 s window. */
const oddTimestamp: fc.Arbitrary<string> = fc
  .oneof(
    fc.bigInt({ min: 10n ** 15n, max: 10n ** 40n }).map(String), // huge
    fc.integer({ min: 1, max: 2_000_000_000 }).map((n) => `-${n}`), // negative
    fc.integer({ min: 0, max: 99 }).map((f) => `${nowSeconds()}.${f}`), // float
    fc.constantFrom('NaN', 'Infinity', '-Infinity', 'null', 'undefined', 'true', '0', '00', '-0', '0x0'),
    fc.integer({ min: 0, max: 9 }).map(() => `${(nowSeconds() / 1e9).toFixed(9)}e9`), // exponent
    fc.constant(`0x${nowSeconds().toString(16)}`), // hex
    fc.constant(`+${nowSeconds()}`),
    fc.constant(String(nowSeconds()).replace(/\d/g, (d) => String.fromCharCode(0xff10 + Number(d)))), // fullwidth digits
    fc.integer({ min: 400, max: 2_000_000_000 }).map((d) => String(nowSeconds() - d)), // far past
    fc.integer({ min: 400, max: 10_000_000 }).map((d) => String(nowSeconds() + d)), // far future
    fc.string({ maxLength: 20 }).map((s) => s.replace(/[\r\n]/g, '')),
  )
  // A junk string can be a valid timestamp by chance; those are not odd.
  .filter((t) => !(/^\d{1,15}$/.test(t.trim()) && Math.abs(Number(t.trim()) - nowSeconds()) <= 350))
  .filter((t) => t.trim() !== '' || t === ''); // blank stays blank (a missing timestamp)

/** JSON values that are not a usable non-empty string (null excluded: some fields treat it as absent). */
const notAString: fc.Arbitrary<unknown> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
  fc.constant(''),
  fc.integer({ min: 256, max: 600 }).map((n) => 'x'.repeat(n)), // longer than any id
  fc.string({ maxLength: 10 }).map((s) => `${s}\u0000`), // PostgreSQL text cannot hold NUL
);
const absent = Symbol('absent');
const notAStringOrMissing = fc.oneof(notAString, fc.constant(null), fc.constant(absent));

/** A deep JSON value: `depth` nested arrays (the adapters refuse bodies deeper than 256). */
const deep = fc.integer({ min: 300, max: 20_000 }).map((depth) => ({ raw: `${'['.repeat(depth)}${']'.repeat(depth)}` }));

interface Broken {
  type: SourceType;
  body: Buffer;
  /** Overrides for the signature headers (standard-webhooks' webhook-id). */
  id?: string;
  what: string;
}

/** A validly signable body that breaks the contract in one field. */
function brokenBodies(): fc.Arbitrary<Broken> {
  const set = (type: SourceType, field: string, value: unknown, nested?: string): Broken => {
    const body = validBody(type);
    const holder = nested ? ((body[nested] = { ...(body[nested] as object) }) as Record<string, unknown>) : body;
    if (value === absent) delete holder[field];
    else holder[field] = value;
    let text = JSON.stringify(body);
    // A deep value is spliced in as text: building it as an object would overflow JSON.stringify.
    if (typeof value === 'object' && value !== null && 'raw' in value) text = text.replace(JSON.stringify(value), (value as { raw: string }).raw);
    return { type, body: Buffer.from(text), what: `${nested ? `${nested}.` : ''}${field} = ${text.slice(0, 120)}` };
  };
  const unknownStatus = fc.string({ maxLength: 20 }).filter((s) => messageStatus(s) === undefined);
  const notAnObject = fc.oneof(fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }), fc.string(), fc.integer(), fc.boolean(), fc.constant(null));
  return fc.oneof(
    // momo-automation
    notAStringOrMissing.map((v) => set('momo-automation', 'id', v)),
    notAStringOrMissing.map((v) => set('momo-automation', 'event', v)),
    fc.oneof(fc.string(), fc.integer(), fc.boolean(), fc.array(fc.string()), fc.constant(null), fc.constant(absent)).map((v) => set('momo-automation', 'subscription', v)),
    notAStringOrMissing.map((v) => set('momo-automation', 'id', v, 'subscription')),
    fc.constant(absent).map((v) => set('momo-automation', 'data', v)),
    deep.map((v) => set('momo-automation', 'data', v)),
    // momo-communication
    notAStringOrMissing.map((v) => set('momo-communication', 'event', v)),
    notAString.map((v) => set('momo-communication', 'message_id', v)), // null is "no message id", which is allowed
    notAString.map((v) => set('momo-communication', 'order_id', v)),
    notAString.map((v) => set('momo-communication', 'group_id', v)),
    fc.oneof(notAString, unknownStatus, fc.constant(null), fc.constant(absent)).map((v) => set('momo-communication', 'status', v)),
    deep.map((v) => set('momo-communication', 'extra', v)),
    // standard-webhooks
    notAStringOrMissing.map((v) => set('standard-webhooks', 'type', v)),
    fc.integer({ min: 256, max: 600 }).map((n) => set('standard-webhooks', 'messageId', 'm'.repeat(n))),
    deep.map((v) => set('standard-webhooks', 'data', v)),
    fc.integer({ min: 256, max: 2_000 }).map((n): Broken => ({ ...set('standard-webhooks', 'type', 'order.created'), id: 'w'.repeat(n), what: `webhook-id of ${n} characters` })),
    // a body that is JSON but not an object, for every contract
    fc.tuple(fc.constantFrom(...types), notAnObject).map(([type, v]): Broken => ({ type, body: Buffer.from(JSON.stringify(v)), what: `body ${JSON.stringify(v)}` })),
  );
}

// ---------------------------------------------------------------------------------------------

describe('intake fuzzing (fast-check, real HTTP)', () => {
  let t: TestPlatform;
  const sources = {} as Record<SourceType, Source>;
  let before: Record<string, number>;

  const counts = async () => {
    const out: Record<string, number> = {};
    for (const table of ['events', 'receipts', 'messages', 'deliveries']) out[table] = Number((await t.platform.db(table).count({ n: '*' }))[0]!.n);
    return out;
  };
  const send = (path: string, headers: Headers, body: Buffer): Promise<RawResponse> =>
    rawExchange(t.platform.port, rawRequest('POST', path, [['content-type', 'application/json'], ...headers, ['content-length', String(body.length)]], body), 30_000);
  const is4xx = (res: RawResponse) => res.status !== undefined && res.status >= 400 && res.status < 500;

  beforeAll(async () => {
    t = await startTestPlatform();
    const tenant = await t.createTenant('fuzz');
    // An endpoint, so an event that slipped through would also show up as a delivery.
    expect((await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/never' } })).status).toBe(201);
    const secrets: Partial<Record<SourceType, string>> = {
      'momo-communication': 'comm-fuzz-secret-0123456789',
      'momo-automation': 'auto-fuzz-secret-0123456789',
      'standard-webhooks': undefined, // generated whsec_
    };
    for (const type of types) {
      const res = await tenant.call('POST', '/v1/sources', { body: { type, name: type, ...(secrets[type] ? { secret: secrets[type] } : {}) } });
      expect(res.status).toBe(201);
      sources[type] = { id: res.body.id, type, secret: secrets[type] ?? res.body.secret };
    }
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('control: a valid callback of each contract is accepted through the same raw client', async () => {
    // Without this, "400" below could mean the test signs wrongly rather than that the body is bad.
    for (const type of types) {
      const body = Buffer.from(JSON.stringify(validBody(type)));
      const res = await send(`/inbound/${sources[type].id}`, signed(sources[type], body), body);
      expect({ type, status: res.status }).toEqual({ type, status: 200 });
    }
    before = await counts();
  });

  it('random bytes with hostile signature headers, encodings and source ids: only 4xx', async () => {
    const path = fc.oneof(
      fc.constantFrom(...types).map((type) => `/inbound/${sources[type].id}`),
      fc.stringMatching(/^src_[0-9a-z]{26}$/).map((id) => `/inbound/${id}`),
      fc.string({ maxLength: 30 }).map((s) => `/inbound/${encodeURIComponent(s)}`),
    );
    const encoding = fc.option(fc.constantFrom('identity', 'gzip', 'deflate', 'br', 'x-bogus', 'gzip, br'), { nil: undefined });
    await fc.assert(
      fc.asyncProperty(path, fc.uint8Array({ maxLength: 4_096 }), hostileHeaders, encoding, async (p, bytes, headers, enc) => {
        const res = await send(p, enc ? [...headers, ['content-encoding', enc]] : headers, Buffer.from(bytes));
        expect(is4xx(res), `${res.status} ${res.text.slice(0, 300)}`).toBe(true);
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await counts()).toEqual(before);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
  });

  it('broken and hostile signature headers on a valid body: only 4xx, never accepted', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...types), hostileHeaders, fc.boolean(), async (type, headers, keepOthers) => {
        const source = sources[type];
        const body = Buffer.from(JSON.stringify(validBody(type)));
        // Either only hostile headers, or the real ones with one replaced by a hostile value (the
        // genuine signature header is dropped, so nothing here can carry a valid signature).
        const genuine = signed(source, body).filter(([name]) => !headers.some(([h]) => h === name) && !(name === 'x-signature' || name === 'x-momo-signature' || name === 'webhook-signature'));
        const res = await send(`/inbound/${source.id}`, keepOthers ? [...genuine, ...headers] : headers, body);
        expect(is4xx(res), `${res.status} ${res.text.slice(0, 300)}`).toBe(true);
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await counts()).toEqual(before);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
  });

  it('huge, negative, fractional, NaN, exponent and far-off timestamps, correctly signed over what was sent: 401', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom<SourceType>('momo-automation', 'standard-webhooks'), oddTimestamp, async (type, ts) => {
        const source = sources[type];
        const body = Buffer.from(JSON.stringify(validBody(type)));
        const res = await send(`/inbound/${source.id}`, signed(source, body, { t: ts }), body);
        // The header itself may be unreadable to Node (400); otherwise the timestamp is refused.
        expect([400, 401], `${JSON.stringify(ts)} → ${res.status} ${res.text.slice(0, 200)}`).toContain(res.status);
        if (res.status === 400) expect(ts).toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await counts()).toEqual(before);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
  });

  it('validly signed bodies with wrong JSON types, missing fields, non-objects and deep nesting: 400', async () => {
    await fc.assert(
      fc.asyncProperty(brokenBodies(), async (broken) => {
        const source = sources[broken.type];
        const res = await send(`/inbound/${source.id}`, signed(source, broken.body, broken.id ? { id: broken.id } : {}), broken.body);
        expect({ what: broken.what, status: res.status }).toEqual({ what: broken.what, status: 400 });
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await counts()).toEqual(before);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
  });

  it('validly signed random bytes: 400', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...types), fc.uint8Array({ maxLength: 4_096 }), async (type, bytes) => {
        const source = sources[type];
        const body = Buffer.from(bytes);
        const res = await send(`/inbound/${source.id}`, signed(source, body), body);
        expect(res.status, res.text.slice(0, 300)).toBe(400);
      }),
      { numRuns: NUM_RUNS },
    );
    expect(await counts()).toEqual(before);
    expect((await t.call('GET', '/readyz')).status).toBe(200);
  });

  describe('the extremes, once each', () => {
    const mb = 'x'.repeat(1_000_000); // 1 MB: under the 1 MiB limit with the rest of the body

    it.each<[SourceType, string, string?]>([
      ['momo-automation', 'id'],
      ['momo-automation', 'event'],
      ['momo-automation', 'id', 'subscription'],
      ['momo-communication', 'message_id'],
      ['momo-communication', 'event'],
      ['momo-communication', 'status'],
      ['standard-webhooks', 'type'],
      ['standard-webhooks', 'messageId'],
    ])('%s: a 1 MB string as %s (in %s) is 400', async (type, field, nested) => {
      const body = validBody(type);
      if (nested) (body[nested] as Record<string, unknown>)[field] = mb;
      else body[field] = mb;
      const bytes = Buffer.from(JSON.stringify(body));
      expect(bytes.length).toBeLessThan(1_048_576);
      const res = await send(`/inbound/${sources[type].id}`, signed(sources[type], bytes), bytes);
      expect(res.status).toBe(400);
    });

    it('a signature header of 10 KB, a v1= flood, repeated t= and NUL bytes: 4xx, and 431 once the block passes 16 KiB', async () => {
      const auto = sources['momo-automation'];
      const body = Buffer.from(JSON.stringify(validBody('momo-automation')));
      const [[, good]] = signed(auto, body) as [[string, string]];
      const now = nowSeconds();
      const cases: Array<[string, string | Buffer, number[]]> = [
        ['10 KB value', `t=${now},v1=${'a'.repeat(10_240)}`, [401]],
        ['v1= flood under 16 KiB', `t=${now},${Array.from({ length: 200 }, () => `v1=${'f'.repeat(64)}`).join(',')}`, [401]],
        ['v1= flood over 16 KiB', `t=${now},${Array.from({ length: 1_000 }, () => `v1=${'f'.repeat(64)}`).join(',')}`, [431]],
        // The genuine signature, but with t= twice: which one was signed is ambiguous, so refused.
        ['repeated t= around a good signature', `t=${now},${good}`, [401]],
        ['NUL byte', Buffer.from(`t=${now},v1=\u0000${'a'.repeat(63)}`), [400]],
        ['Unicode', `t=${now},v1=${'é'.repeat(64)}`, [401]],
      ];
      for (const [what, value, expected] of cases) {
        const res = await send(`/inbound/${auto.id}`, [['x-momo-signature', value]], body);
        expect({ what, status: res.status, expected: expected.includes(res.status!) }).toEqual({ what, status: res.status, expected: true });
      }
      expect(await counts()).toEqual(before);
    });

    it('the process is still ready and still accepts valid callbacks after all of it', async () => {
      expect((await t.call('GET', '/readyz')).status).toBe(200);
      for (const type of types) {
        const body = Buffer.from(JSON.stringify(validBody(type)));
        const res = await send(`/inbound/${sources[type].id}`, signed(sources[type], body), body);
        expect({ type, status: res.status }).toEqual({ type, status: 200 });
      }
      const after = await counts();
      expect(after.events).toBe(before.events! + 3);
      expect(after.receipts).toBe(before.receipts! + 3);
    });
  });
});
