/**
 * A loopback TCP proxy a test can cut and restore, to give one process a real outage of a service
 * (e.g. PostgreSQL) while the test itself keeps talking to it directly. Nothing is mocked: the
 * process sees exactly what a broken network path looks like.
 *
 *   const proxy = await startTcpProxy({ host: '127.0.0.1', port: 5432 });
 *   proxy.cut('refuse');     // open connections drop, new ones are closed at once
 *   proxy.cut('blackhole');  // connections are accepted (or kept) but nothing ever answers
 *   proxy.restore();
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export type CutMode = 'refuse' | 'blackhole';

export interface TcpProxy {
  port: number;
  /** Starts an outage of the given kind until `restore()`. */
  cut(mode: CutMode): void;
  /** Forwards again; connections held by a black hole are dropped (their byte stream is lost). */
  restore(): void;
  close(): Promise<void>;
  /** Connections closed on arrival so far (a `refuse` outage, or `maxConnections` reached). */
  readonly refused: number;
}

interface Link {
  client: net.Socket;
  upstream?: net.Socket;
  /** Held by a black hole: data in either direction is swallowed. */
  held: boolean;
}

export interface TcpProxyOptions {
  /**
   * Forwards at most this many connections at once and closes any more as they arrive, as a
   * server at its connection limit turns them away (exactly, unlike PostgreSQL's own limits, which
   * concurrent logins can overshoot or undershoot).
   */
  maxConnections?: number;
}

export async function startTcpProxy(target: { host: string; port: number }, options: TcpProxyOptions = {}): Promise<TcpProxy> {
  const links = new Set<Link>();
  let mode: CutMode | undefined;
  let refused = 0;

  const drop = (link: Link) => {
    links.delete(link);
    link.client.destroy();
    link.upstream?.destroy();
  };

  const server = net.createServer((client) => {
    client.on('error', () => client.destroy());
    if (mode === 'refuse' || (options.maxConnections !== undefined && links.size >= options.maxConnections)) {
      refused++;
      return void client.destroy();
    }
    const link: Link = { client, held: mode === 'blackhole' };
    links.add(link);
    client.on('close', () => drop(link));
    if (link.held) {
      client.resume(); // read and discard, never answer
      return;
    }
    const upstream = net.connect(target.port, target.host);
    link.upstream = upstream;
    upstream.on('error', () => upstream.destroy());
    upstream.on('close', () => drop(link));
    // Forward by hand (not pipe) so a black hole can start swallowing bytes mid-connection.
    client.on('data', (chunk: Buffer) => {
      if (!link.held) upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!link.held) client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;

  return {
    port,
    get refused() {
      return refused;
    },
    cut(next) {
      mode = next;
      for (const link of [...links]) {
        if (next === 'refuse') drop(link);
        else link.held = true;
      }
    },
    restore() {
      mode = undefined;
      for (const link of [...links]) if (link.held) drop(link);
    },
    close() {
      mode = 'refuse';
      for (const link of [...links]) drop(link);
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A proxy in front of the test database and the URL that reaches the database through it. */
export async function proxyDatabase(databaseUrl: string, options: TcpProxyOptions = {}): Promise<{ proxy: TcpProxy; url: string }> {
  const target = new URL(databaseUrl);
  const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }, options);
  const viaProxy = new URL(databaseUrl);
  viaProxy.port = String(proxy.port);
  return { proxy, url: viaProxy.toString() };
}
