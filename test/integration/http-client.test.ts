// Real sockets, loopback only: every server listens on 127.0.0.1:0 and no test ever lets the client
// connect anywhere else (non-loopback answers only appear where the client must refuse them, or in
// selectAddress, which does no I/O). Needs neither PostgreSQL nor Redis.
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type DeliveryClientOptions,
  type LookupFn,
  classifyError,
  createDeliveryClient,
  selectAddress,
} from '../../src/outbound/http-client.js';

interface TestServer {
  port: number;
  connections: number;
  requests: { method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }[];
  close(): Promise<void>;
}

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()!();
});

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function httpServer(handler: (req: http.IncomingMessage, res: http.ServerResponse) => void): Promise<TestServer> {
  const sockets = new Set<net.Socket>();
  const state: TestServer = { port: 0, connections: 0, requests: [], close: async () => {} };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      state.requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      handler(req, res);
    });
  });
  server.on('connection', (s) => {
    state.connections++;
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  state.port = await listen(server);
  state.close = () => {
    for (const s of sockets) s.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  cleanups.push(() => state.close());
  return state;
}

async function rawServer(onData: (socket: net.Socket) => void): Promise<number> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('data', () => onData(s));
  });
  const port = await listen(server);
  cleanups.push(() => {
    for (const s of sockets) s.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return port;
}

function client(over: Partial<DeliveryClientOptions> = {}) {
  const c = createDeliveryClient({
    allowPrivateTargets: true,
    connectTimeoutMs: 1_000,
    attemptTimeoutMs: 2_000,
    maxResponseBytes: 64 * 1024,
    excerptBytes: 2 * 1024,
    ...over,
  });
  cleanups.push(() => c.close());
  return c;
}

const payload = { headers: { 'content-type': 'application/json', 'webhook-id': 'evt_1' }, body: '{"id":"evt_1"}' };
const send = (c: ReturnType<typeof client>, url: string) => c.send({ url, ...payload });

describe('responses', () => {
  it('2xx: sends the request as given and returns status and excerpt', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(201).end('ok'));
    const r = await send(client(), `http://127.0.0.1:${srv.port}/hook?a=1`);
    expect(r.outcome).toEqual({ kind: 'response', statusCode: 201 });
    expect(r.responseExcerpt).toBe('ok');
    expect(r.durationMs).toBeGreaterThanOrEqual(0);
    expect(srv.requests).toHaveLength(1);
    expect(srv.requests[0]).toMatchObject({ method: 'POST', url: '/hook?a=1', body: payload.body });
    expect(srv.requests[0]?.headers['webhook-id']).toBe('evt_1');
  });

  it('500 with Retry-After is returned with the header value', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(500, { 'retry-after': '7' }).end('boom'));
    const r = await send(client(), `http://127.0.0.1:${srv.port}/`);
    expect(r.outcome).toEqual({ kind: 'response', statusCode: 500, retryAfter: '7' });
    expect(r.responseExcerpt).toBe('boom');
  });

  it('410 is returned as a response', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(410).end());
    expect((await send(client(), `http://127.0.0.1:${srv.port}/`)).outcome).toEqual({ kind: 'response', statusCode: 410 });
  });

  it('302 is not followed: the Location target receives nothing', async () => {
    const target = await httpServer((_req, res) => res.writeHead(200).end());
    const srv = await httpServer((_req, res) => res.writeHead(302, { location: `http://127.0.0.1:${target.port}/` }).end());
    const r = await send(client(), `http://127.0.0.1:${srv.port}/`);
    expect(r.outcome).toEqual({ kind: 'response', statusCode: 302 });
    expect(target.connections).toBe(0);
  });

  it('reuses the keep-alive connection across sends', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(204).end());
    const c = client();
    for (let i = 0; i < 3; i++) {
      await send(c, `http://127.0.0.1:${srv.port}/`);
      // undici returns the socket to the pool a tick after the body ends; a send in that window
      // would (correctly) open a second connection, so let it settle to test reuse itself.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(srv.requests).toHaveLength(3);
    expect(srv.connections).toBe(1);
  });

  it('caps a huge body: excerpt within excerptBytes, returns quickly, client stays usable', async () => {
    const srv = await httpServer((req, res) => {
      if (req.url === '/small') return void res.writeHead(200).end('fine');
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.on('error', () => {});
      res.end(Buffer.alloc(10 * 1024 * 1024, 'a'));
    });
    const c = client({ maxResponseBytes: 64 * 1024, excerptBytes: 2048 });
    const started = Date.now();
    const r = await send(c, `http://127.0.0.1:${srv.port}/big`);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(r.outcome).toEqual({ kind: 'response', statusCode: 200 });
    expect(r.responseExcerpt).toBe('a'.repeat(2048));
    expect((await send(c, `http://127.0.0.1:${srv.port}/small`)).responseExcerpt).toBe('fine');
  });

  it('cuts the excerpt on a UTF-8 character boundary and drops NULs', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(400).end('ab\u0000c€€'));
    const c = client({ excerptBytes: 9 }); // "ab\0c" (4 bytes) + € (3) + 2 bytes of the second €
    const r = await send(c, `http://127.0.0.1:${srv.port}/`);
    expect(r.responseExcerpt).toBe('abc€');
  });
});

describe('network failures', () => {
  it('connection refused', async () => {
    const server = net.createServer();
    const port = await listen(server);
    await new Promise((resolve) => server.close(resolve));
    const r = await send(client(), `http://127.0.0.1:${port}/x?token=s3cret`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'connection_refused' });
    if (r.outcome.kind === 'error') expect(r.outcome.message).not.toMatch(/s3cret|127\.0\.0\.1|token/);
  });

  it('connection reset: server destroys the socket after the request', async () => {
    const srv = await httpServer((req) => req.socket.destroy());
    const r = await send(client(), `http://127.0.0.1:${srv.port}/`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'connection_reset' });
  });

  it('connection reset: TCP RST', async () => {
    const port = await rawServer((s) => s.resetAndDestroy());
    const r = await send(client(), `http://127.0.0.1:${port}/`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'connection_reset' });
  });

  it('attempt timeout when the server never answers', async () => {
    const srv = await httpServer(() => {});
    const started = Date.now();
    const r = await send(client({ attemptTimeoutMs: 300 }), `http://127.0.0.1:${srv.port}/`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'attempt_timeout' });
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(r.durationMs).toBeGreaterThanOrEqual(250);
  });

  it('a body that never ends is cut by the attempt timeout; the status stands', async () => {
    const srv = await httpServer((_req, res) => {
      res.writeHead(200);
      res.write('partial');
    });
    const started = Date.now();
    const r = await send(client({ attemptTimeoutMs: 300 }), `http://127.0.0.1:${srv.port}/`);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(r.outcome).toEqual({ kind: 'response', statusCode: 200 });
    expect(r.responseExcerpt).toBe('partial');
  });

  it('malformed response', async () => {
    const port = await rawServer((s) => s.end('THIS IS NOT HTTP\r\n\r\n'));
    const r = await send(client(), `http://127.0.0.1:${port}/`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'malformed_response' });
    // no echo of the bytes received
    if (r.outcome.kind === 'error') expect(r.outcome.message).not.toContain('NOT HTTP');
  });

  it('invalid targets are refused without I/O', async () => {
    const c = client();
    for (const url of ['not a url', 'ftp://127.0.0.1/', 'http://user:pw@127.0.0.1:1/']) {
      expect((await send(c, url)).outcome).toMatchObject({ kind: 'error', errorClass: 'invalid_target' });
    }
  });
});

describe('SSRF guard (allowPrivateTargets=false)', () => {
  const forms = [
    (p: number) => `http://127.0.0.1:${p}/`,
    (p: number) => `http://localhost:${p}/`, // resolved by the real dns.lookup
    (p: number) => `http://[::1]:${p}/`,
    (p: number) => `http://2130706433:${p}/`,
    (p: number) => `http://0x7f000001:${p}/`,
    (p: number) => `http://127.1:${p}/`,
    (p: number) => `http://0177.0.0.1:${p}/`,
    (p: number) => `http://[::ffff:127.0.0.1]:${p}/`,
    (p: number) => `http://0.0.0.0:${p}/`,
    (p: number) => `https://127.0.0.1:${p}/`,
  ];
  it.each(forms.map((f) => [f(0), f] as const))('%s is refused and the server sees no connection', async (_n, form) => {
    const srv = await httpServer((_req, res) => res.writeHead(200).end());
    const r = await send(client({ allowPrivateTargets: false }), form(srv.port));
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'ssrf_refused' });
    expect(srv.connections).toBe(0);
  });

  it('DNS rebinding: a lookup answering 127.0.0.1 is refused', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(200).end());
    const lookup: LookupFn = async () => [{ address: '127.0.0.1', family: 4 }];
    const r = await send(client({ allowPrivateTargets: false, lookup }), `http://rebind.example:${srv.port}/`);
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'ssrf_refused' });
    if (r.outcome.kind === 'error') expect(r.outcome.message).not.toContain('127.0.0.1');
    expect(srv.connections).toBe(0);
  });

  it('connects to exactly the address the lookup returned (pinning), once per connection', async () => {
    const srv = await httpServer((_req, res) => res.writeHead(200).end());
    let lookups = 0;
    const lookup: LookupFn = async () => (lookups++, [{ address: '127.0.0.1', family: 4 }]);
    const c = client({ allowPrivateTargets: true, lookup });
    for (let i = 0; i < 2; i++) {
      expect((await send(c, `http://pinned.test:${srv.port}/`)).outcome).toEqual({ kind: 'response', statusCode: 200 });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(srv.requests.map((q) => q.headers.host)).toEqual([`pinned.test:${srv.port}`, `pinned.test:${srv.port}`]);
    expect(lookups).toBe(srv.connections);
    expect(lookups).toBe(1);
  });

  it('selectAddress checks every answer, prefers IPv4, and refuses empty answers', () => {
    const a = (...xs: string[]) => xs.map((address) => ({ address, family: net.isIPv6(address) ? 6 : 4 }));
    expect(selectAddress(a('2606:4700::1111', '8.8.8.8'), false)).toBe('8.8.8.8');
    expect(selectAddress(a('2606:4700::1111'), false)).toBe('2606:4700::1111');
    expect(() => selectAddress(a('8.8.8.8', '127.0.0.1'), false)).toThrow(/non-public/);
    expect(() => selectAddress(a('8.8.8.8', '::ffff:10.0.0.1'), false)).toThrow(/non-public/);
    expect(() => selectAddress(a('8.8.8.8', '169.254.169.254'), false)).toThrow(/link-local or cloud metadata/);
    // With private targets allowed, an answer that includes link-local or metadata is still refused.
    for (const answer of [a('127.0.0.1', '169.254.169.254'), a('169.254.169.254'), a('::ffff:169.254.169.254'), a('fe80::1'), a('fd00:ec2::254'), a('100.100.100.200'), a('64:ff9b::a9fe:a9fe')]) {
      expect(() => selectAddress(answer, true), answer[0]!.address).toThrow(/refused under every setting/);
    }
    expect(selectAddress(a('::1', '127.0.0.1'), true)).toBe('127.0.0.1');
    expect(() => selectAddress([], true)).toThrow();
  });
});

describe('DNS', () => {
  it('ENOTFOUND → dns_failure without leaking the hostname', async () => {
    const lookup: LookupFn = async (host) => {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    };
    const r = await send(client({ lookup }), 'http://nope.invalid:9/');
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'dns_failure' });
    if (r.outcome.kind === 'error') expect(r.outcome.message).not.toContain('nope');
  });

  it('a lookup that hangs is bounded by the connect timeout', async () => {
    const lookup: LookupFn = () => new Promise(() => {});
    const started = Date.now();
    const r = await send(client({ lookup, connectTimeoutMs: 200 }), 'http://slow.test:9/');
    expect(r.outcome).toMatchObject({ kind: 'error', errorClass: 'connect_timeout' });
    expect(Date.now() - started).toBeLessThan(1_500);
  });
});

describe('classifyError (no I/O)', () => {
  const withCode = (code: unknown, message = 'GET https://h/x?secret=1 Authorization: Bearer t') =>
    Object.assign(new Error(message), { code });
  it.each([
    ['ECONNREFUSED', 'connection_refused'],
    ['ECONNRESET', 'connection_reset'],
    ['UND_ERR_SOCKET', 'connection_reset'],
    ['EAI_AGAIN', 'dns_failure'],
    ['UND_ERR_CONNECT_TIMEOUT', 'connect_timeout'],
    ['UND_ERR_HEADERS_TIMEOUT', 'attempt_timeout'],
    ['UND_ERR_BODY_TIMEOUT', 'attempt_timeout'],
    ['HPE_INVALID_CONSTANT', 'malformed_response'],
    ['CERT_HAS_EXPIRED', 'tls_handshake_failed'],
    ['EHOSTUNREACH', 'network_other'],
  ])('%s → %s, message is fixed text plus code', (code, cls) => {
    const [errorClass, message] = classifyError(withCode(code));
    expect(errorClass).toBe(cls);
    expect(message).toContain(code);
    expect(message).not.toMatch(/secret|Bearer|https:/);
  });
  it('looks through cause chains and ignores junk codes', () => {
    expect(classifyError(new Error('wrapped', { cause: withCode('ECONNREFUSED') }))[0]).toBe('connection_refused');
    expect(classifyError(withCode('no spaces allowed?secret'))).toEqual(['network_other', 'network error']);
    expect(classifyError('a string')).toEqual(['network_other', 'network error']);
    expect(classifyError(null)).toEqual(['network_other', 'network error']);
  });
});
