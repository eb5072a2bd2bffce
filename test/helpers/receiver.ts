import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** Decides how the receiver answers one request; may also do nothing (hang) or destroy the socket. */
export type Responder = (req: ReceivedRequest, res: ServerResponse, index: number) => void | Promise<void>;

export const ok: Responder = (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
};

export interface Receiver {
  url: string;
  requests: ReceivedRequest[];
  setResponder(responder: Responder): void;
  /** Distinct webhook-ids received. */
  eventIds(): Set<string>;
  close(): Promise<void>;
}

/**
 * A real HTTP server on 127.0.0.1 that records every request it receives; on a free port unless
 * `port` is given (e.g. a receiver coming back where an endpoint's URL points).
 */
export async function startReceiver(responder: Responder = ok, opts: { port?: number } = {}): Promise<Receiver> {
  const requests: ReceivedRequest[] = [];
  let current = responder;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const received: ReceivedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        at: Date.now(),
      };
      requests.push(received);
      void Promise.resolve(current(received, res, requests.length - 1)).catch(() => res.destroy());
    });
  });
  server.keepAliveTimeout = 1_000;
  await new Promise<void>((resolve) => server.listen(opts.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    setResponder: (r) => {
      current = r;
    },
    eventIds: () => new Set(requests.map((r) => String(r.headers['webhook-id']))),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
