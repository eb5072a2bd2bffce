// Shared by the security suite: loopback listeners that count every connection on one port, and a
// raw HTTP/1.1 client for requests fetch() refuses to send (NUL bytes, raw UTF-8 in headers,
// lying Content-Length, trickled bytes).
import { createServer, type Server } from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface LoopbackListeners {
  port: number;
  /** TCP connections accepted on any of the addresses, and complete HTTP requests among them. */
  readonly connections: number;
  readonly requests: number;
  /** Addresses actually listened on (::1 is skipped where the host has no IPv6 loopback). */
  addresses: string[];
  reset(): void;
  close(): Promise<void>;
}

/**
 * One port on every loopback address an SSRF notation can reach: 127.0.0.1 (also what 0.0.0.0 and
 * ::ffff:127.0.0.1 connect to), 127.0.0.2 (any 127/8 address is local on Linux) and ::1. A request
 * that slipped past the guard would land here and be counted, whichever notation it used.
 */
export async function startLoopbackListeners(): Promise<LoopbackListeners> {
  for (let tries = 0; ; tries++) {
    try {
      return await listenEverywhere();
    } catch (err) {
      // The port picked on 127.0.0.1 may be taken on another address; pick another one.
      if ((err as { code?: string }).code !== 'EADDRINUSE' || tries >= 5) throw err;
    }
  }
}

async function listenEverywhere(): Promise<LoopbackListeners> {
  const state = { connections: 0, requests: 0 };
  const servers: Server[] = [];
  const make = () => {
    const server = createServer((req, res) => {
      state.requests++;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
    server.on('connection', () => state.connections++);
    servers.push(server);
    return server;
  };
  const listen = (server: Server, port: number, host: string) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
  const closeAll = () =>
    Promise.all(
      servers.map(
        (s) =>
          new Promise<void>((resolve) => {
            s.closeAllConnections();
            s.close(() => resolve());
          }),
      ),
    ).then(() => undefined);

  const first = make();
  await listen(first, 0, '127.0.0.1');
  const port = (first.address() as AddressInfo).port;
  const addresses = ['127.0.0.1'];
  try {
    await listen(make(), port, '127.0.0.2');
    addresses.push('127.0.0.2');
    const v6 = make();
    await listen(v6, port, '::1').then(
      () => addresses.push('::1'),
      (err: { code?: string }) => {
        servers.pop();
        if (err.code === 'EADDRINUSE') throw err;
        // No IPv6 loopback on this host: IPv6 notations then fail to connect at all, and the
        // attempt assertions (ssrf_refused, one attempt) still tell a refusal from a try.
      },
    );
  } catch (err) {
    await closeAll();
    throw err;
  }
  return {
    port,
    get connections() {
      return state.connections;
    },
    get requests() {
      return state.requests;
    },
    addresses,
    reset: () => {
      state.connections = 0;
      state.requests = 0;
    },
    close: closeAll,
  };
}

export interface RawResponse {
  /** Status code of the first response, or undefined when the server closed without answering. */
  status?: number;
  /** Everything the server sent, as latin1 text. */
  text: string;
  /** How the exchange ended: the server closed the connection, or the client gave up waiting. */
  ended: 'closed' | 'timeout';
  ms: number;
}

/**
 * Sends raw bytes over a fresh TCP connection and collects the answer until the server closes the
 * connection (or `timeoutMs`). Requests should say `connection: close` so a complete answer ends it.
 */
export function rawExchange(port: number, bytes: Buffer | string | Array<Buffer | string>, timeoutMs = 30_000): Promise<RawResponse> {
  const started = Date.now();
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (ended: RawResponse['ended']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : undefined, text, ended, ms: Date.now() - started });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => finish('closed')); // a reset after the answer still ends it
    socket.on('close', () => finish('closed'));
    socket.on('connect', () => {
      for (const part of Array.isArray(bytes) ? bytes : [bytes]) socket.write(part);
    });
  });
}

/** A request as raw bytes: header values are written byte for byte (a string is taken as UTF-8). */
export function rawRequest(method: string, path: string, headers: Array<[string, string | Buffer]>, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const parts: Buffer[] = [Buffer.from(`${method} ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n`, 'latin1')];
  for (const [name, value] of headers) parts.push(Buffer.from(`${name}: `, 'latin1'), Buffer.isBuffer(value) ? value : Buffer.from(value, 'utf8'), Buffer.from('\r\n'));
  parts.push(Buffer.from('\r\n'), Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8'));
  return Buffer.concat(parts);
}
