// What one client can make the HTTP server hold: bodies over the limit (honest, lying about their
// length, chunked, compressed), clients that trickle their headers or body (slow-loris), and header
// floods. Each is bounded, answered with a 4xx (or cut), stores nothing, and leaves the process
// ready. The limits are documented in docs/security.md. Timeouts are lowered through the same
// environment variables an operator uses, so the test waits seconds, not half a minute.
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { standard } from '../helpers/providers.js';
import { rawExchange, rawRequest } from './helpers.js';

const HEADERS_TIMEOUT_MS = 2_000;
const REQUEST_TIMEOUT_MS = 4_000;
const MAX_BODY = 1_048_576; // MAX_BODY_BYTES default
/** Far above every bound under test (plus the server's 1 s sweep), far below what a stuck client would take. */
const CUT_WITHIN_MS = 20_000;

describe('HTTP limits', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let sourceId: string;
  let secret: string;
  let n = 0;

  const stored = async () => ({
    events: Number((await t.platform.db('events').count({ n: '*' }))[0]!.n),
    receipts: Number((await t.platform.db('receipts').count({ n: '*' }))[0]!.n),
  });
  const ready = async () => (await t.call('GET', '/readyz')).status;
  /** A standard-webhooks body padded to exactly `size` bytes, validly signed: only its size can be wrong. */
  const signedBody = (size: number) => {
    const id = `msg_limit_${++n}`;
    const head = '{"type":"limits.test","data":{"pad":"';
    const tail = '"}}';
    const body = head + 'x'.repeat(size - head.length - tail.length) + tail;
    return { id, body, headers: standard.headers(secret, id, body) };
  };
  const inbound = () => `/inbound/${sourceId}`;

  beforeAll(async () => {
    t = await startTestPlatform({ env: { HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) } });
    tenant = await t.createTenant();
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'limits' } });
    expect(source.status).toBe(201);
    sourceId = source.body.id;
    secret = source.body.secret;
  });
  afterAll(async () => {
    await t?.stop();
  });

  describe('body size (MAX_BODY_BYTES, 1 MiB by default)', () => {
    it('accepts a body of exactly the limit and refuses one byte more with 413, storing nothing', async () => {
      const atLimit = signedBody(MAX_BODY);
      expect(Buffer.byteLength(atLimit.body)).toBe(MAX_BODY);
      const ok = await t.call('POST', inbound(), { rawBody: atLimit.body, headers: atLimit.headers });
      expect(ok.status, ok.text).toBe(200);

      const before = await stored();
      const over = signedBody(MAX_BODY + 1);
      const res = await t.call('POST', inbound(), { rawBody: over.body, headers: over.headers });
      expect(res.status).toBe(413);
      expect(res.body).toEqual({ error: { code: 'payload_too_large', message: expect.any(String) } });
      expect(await stored()).toEqual(before);
    });

    it('answers 413 from a Content-Length over the limit without waiting for the body', async () => {
      const before = await stored();
      const { id, headers } = signedBody(64);
      // Announces 50 MB, sends 10 bytes and then nothing: the answer must come from the header
      // alone, long before the request timeout would have cut the connection (that would be 408).
      const res = await rawExchange(
        t.platform.port,
        rawRequest('POST', inbound(), [...Object.entries(headers), ['content-length', String(50 * 1024 * 1024)]], '{"type":"x'),
        CUT_WITHIN_MS,
      );
      expect({ id, status: res.status }).toEqual({ id, status: 413 });
      expect(res.ended).toBe('closed');
      expect(await stored()).toEqual(before);
    });

    it('reads only Content-Length bytes when the body is longer than announced, and stores nothing', async () => {
      const before = await stored();
      const { body, headers } = signedBody(2 * MAX_BODY);
      // The first 100 bytes are the body; the signature covered all of it, so they fail it. The
      // rest is not a valid next request. Neither part may be taken as (part of) an event.
      const res = await rawExchange(t.platform.port, rawRequest('POST', inbound(), [...Object.entries(headers), ['content-length', '100']], body), CUT_WITHIN_MS);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(await stored()).toEqual(before);
    });

    it('cuts a chunked body at the limit with 413, even one that would never end', async () => {
      const before = await stored();
      const { id, headers } = signedBody(64);
      const chunk = Buffer.alloc(64 * 1024, 'a');
      const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
      // 40 MB of chunks, far past the limit, with no terminating chunk: the client would go on.
      const parts: Buffer[] = [rawRequest('POST', inbound(), [...Object.entries(headers).filter(([k]) => k !== 'content-length'), ['transfer-encoding', 'chunked']])];
      for (let i = 0; i < 640; i++) parts.push(frame);
      const res = await rawExchange(t.platform.port, parts, CUT_WITHIN_MS);
      expect({ id, status: res.status, ended: res.ended }).toEqual({ id, status: 413, ended: 'closed' });
      expect(await stored()).toEqual(before);
    });

    it('stores nothing for a client that disconnects halfway through its body', async () => {
      const before = await stored();
      const { body, headers } = signedBody(10_000);
      const socket = net.connect(t.platform.port, '127.0.0.1');
      socket.on('error', () => undefined);
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(rawRequest('POST', inbound(), [...Object.entries(headers), ['content-length', String(body.length)]], body.slice(0, 5_000)));
      await new Promise((r) => setTimeout(r, 200));
      socket.destroy();
      // The server is still whole: it answers the next caller, and the half body became nothing.
      // A whole callback sent afterwards is stored, and it is the only thing that was.
      expect(await ready()).toBe(200);
      const after = signedBody(1_000);
      expect((await t.call('POST', inbound(), { rawBody: after.body, headers: after.headers })).status).toBe(200);
      expect(await stored()).toEqual({ events: before.events + 1, receipts: before.receipts + 1 });
    });

    it('applies the limit to the decompressed size: a gzip bomb is 413', async () => {
      const before = await stored();
      // 64 KiB on the wire, 64 MiB inflated.
      const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024, 0));
      expect(bomb.length).toBeLessThan(MAX_BODY);
      const id = `msg_bomb_${++n}`;
      const res = await t.call('POST', inbound(), { rawBody: bomb, headers: { ...standard.headers(secret, id, bomb.toString('latin1')), 'content-encoding': 'gzip' } });
      expect(res.status).toBe(413);
      expect(await stored()).toEqual(before);
      expect(await ready()).toBe(200);
    });

    it('limits the tenant API body to 1 MiB too (413)', async () => {
      const before = await stored();
      const res = await tenant.call('POST', '/v1/events', { body: { type: 'big', data: { pad: 'x'.repeat(MAX_BODY) } } });
      expect(res.status).toBe(413);
      expect(res.body.error.code).toBe('payload_too_large');
      expect(await stored()).toEqual(before);
    });
  });

  describe('slow clients (HTTP_HEADERS_TIMEOUT_MS, HTTP_REQUEST_TIMEOUT_MS)', () => {
    /** Sends `head` at once, then `slow` one byte every `everyMs`, until the server closes the connection. */
    async function slowExchange(head: Buffer, slow: Buffer, everyMs = 500) {
      const started = Date.now();
      return new Promise<{ status?: number; ms: number; sentAll: boolean }>((resolve) => {
        const socket = net.connect(t.platform.port, '127.0.0.1');
        let text = '';
        let i = 0;
        let timer: NodeJS.Timeout | undefined;
        const done = () => {
          clearInterval(timer);
          socket.destroy();
          const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
          resolve({ status: m ? Number(m[1]) : undefined, ms: Date.now() - started, sentAll: i >= slow.length });
        };
        socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
        socket.on('close', done);
        socket.on('error', () => undefined);
        socket.on('connect', () => {
          socket.write(head);
          timer = setInterval(() => {
            if (i < slow.length && !socket.destroyed) socket.write(slow.subarray(i, ++i));
          }, everyMs);
        });
        // The guard of the test itself: a server that never cuts would fail here, not hang.
        setTimeout(done, CUT_WITHIN_MS + 5_000).unref();
      });
    }

    it('cuts a client that sends its headers one byte every 500 ms (408, connection closed)', async () => {
      // 200 header bytes at 2 per second would take 100 s to arrive.
      const head = Buffer.from(`POST ${inbound()} HTTP/1.1\r\nhost: 127.0.0.1\r\n`);
      const slow = Buffer.from(`x-slow: ${'a'.repeat(190)}\r\n\r\n`);
      const res = await slowExchange(head, slow);
      expect(res.sentAll).toBe(false);
      expect(res.ms).toBeLessThan(CUT_WITHIN_MS);
      expect(res.ms).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 100); // not cut for some other reason first
      expect(res.status).toBe(408);
      expect(await ready()).toBe(200);
    });

    it('cuts a client that trickles its body (408, nothing stored)', async () => {
      const before = await stored();
      const { body, headers } = signedBody(200);
      const head = rawRequest('POST', inbound(), [...Object.entries(headers), ['content-length', String(body.length)]]);
      // Headers arrive at once; the 200-byte body would take 100 s.
      const res = await slowExchange(head, Buffer.from(body));
      expect(res.sentAll).toBe(false);
      expect(res.ms).toBeLessThan(CUT_WITHIN_MS);
      expect(res.ms).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 100);
      expect(res.status).toBe(408);
      expect(await stored()).toEqual(before);
    });

    it('keeps serving everyone else while 50 slow clients hold connections', async () => {
      const head = Buffer.from(`POST ${inbound()} HTTP/1.1\r\nhost: 127.0.0.1\r\n`);
      const slow = Buffer.from(`x-slow: ${'a'.repeat(190)}\r\n\r\n`);
      const lorises = Array.from({ length: 50 }, () => slowExchange(head, slow));
      // While they hang on, readiness and a real callback are answered.
      expect(await ready()).toBe(200);
      const { id, body, headers } = signedBody(300);
      const res = await t.call('POST', inbound(), { rawBody: body, headers });
      expect({ id, status: res.status }).toEqual({ id, status: 200 });
      const cut = await Promise.all(lorises);
      // And every one of them was cut by the server (408), none outlasted the bound.
      expect(cut.filter((c) => c.sentAll || c.status !== 408 || c.ms >= CUT_WITHIN_MS)).toEqual([]);
    });
  });

  describe('header floods (16 KiB header block)', () => {
    it('answers 431 to one 100 KB header and stays ready', async () => {
      const res = await rawExchange(t.platform.port, rawRequest('POST', inbound(), [['x-flood', 'a'.repeat(100 * 1024)], ['content-length', '0']]), CUT_WITHIN_MS);
      expect(res.status).toBe(431);
      expect(await ready()).toBe(200);
    });

    it('answers 431 to thousands of headers and stays ready', async () => {
      const headers: Array<[string, string]> = Array.from({ length: 5_000 }, (_, i) => [`x-h${i}`, 'value']);
      const res = await rawExchange(t.platform.port, rawRequest('POST', inbound(), [...headers, ['content-length', '0']]), CUT_WITHIN_MS);
      expect(res.status).toBe(431);
      expect(await ready()).toBe(200);
    });

    it('answers a flood of signature headers that fits in 16 KiB with a 4xx, not a crash', async () => {
      const before = await stored();
      const { body, headers } = signedBody(100);
      const flood: Array<[string, string]> = Array.from({ length: 1_500 }, (_, i) => ['webhook-signature', `v1,${i}`]);
      const res = await rawExchange(
        t.platform.port,
        rawRequest('POST', inbound(), [...Object.entries(headers).filter(([k]) => k !== 'webhook-signature'), ...flood, ['content-length', String(body.length)]], body),
        CUT_WITHIN_MS,
      );
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
      expect(await stored()).toEqual(before);
      expect(await ready()).toBe(200);
    });
  });

  describe('request framing (request smuggling)', () => {
    // A front proxy and this server must never disagree on where a request ends; Node's parser is
    // strict, and these prove nothing relaxes it (no insecureHTTPParser, no lenient flags).
    const head = () => `POST ${inbound()} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n`;
    it.each([
      ['Content-Length with Transfer-Encoding', () => `${head()}content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`],
      ['two different Content-Length headers', () => `${head()}content-length: 4\r\ncontent-length: 5\r\n\r\nabcde`],
      ['chunked not last in Transfer-Encoding', () => `${head()}transfer-encoding: chunked, identity\r\n\r\n0\r\n\r\n`],
      ['an unknown transfer coding', () => `${head()}transfer-encoding: xchunked\r\n\r\n0\r\n\r\n`],
      ['a space before the colon', () => `${head()}content-length : 4\r\n\r\nabcd`],
      ['bare LF line endings', () => head().replaceAll('\r\n', '\n') + 'content-length: 4\n\nabcd'],
      ['an obsolete folded header', () => `${head()}x-a: a\r\n b\r\ncontent-length: 4\r\n\r\nabcd`],
      ['a chunk size that is not hex', () => `${head()}transfer-encoding: chunked\r\n\r\nzz\r\nabcd\r\n0\r\n\r\n`],
    ])('%s: 400, nothing stored', async (_what, build) => {
      const before = await stored();
      const res = await rawExchange(t.platform.port, build(), CUT_WITHIN_MS);
      expect(res.status).toBe(400);
      expect(await stored()).toEqual(before);
    });
  });

  describe('configuration', () => {
    const required = { ADMIN_TOKEN: 'a-admin-token-of-at-least-24-chars', SECRETS_KEY: Buffer.alloc(32, 1).toString('base64') };

    it('defaults to a 10 s header and a 30 s request timeout', () => {
      expect(loadConfig(required)).toMatchObject({ httpHeadersTimeoutMs: 10_000, httpRequestTimeoutMs: 30_000, maxBodyBytes: MAX_BODY });
    });

    it.each([
      [{ HTTP_HEADERS_TIMEOUT_MS: '0' }, 'HTTP_HEADERS_TIMEOUT_MS'],
      [{ HTTP_HEADERS_TIMEOUT_MS: '10s' }, 'HTTP_HEADERS_TIMEOUT_MS'],
      [{ HTTP_REQUEST_TIMEOUT_MS: '0' }, 'HTTP_REQUEST_TIMEOUT_MS'],
      [{ HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '10000' }, 'HTTP_HEADERS_TIMEOUT_MS'],
    ])('refuses %j, naming %s', (env, name) => {
      expect(() => loadConfig({ ...required, ...env })).toThrow(ConfigError);
      expect(() => loadConfig({ ...required, ...env })).toThrow(new RegExp(`^invalid configuration: ${name}:`));
    });
  });
});
