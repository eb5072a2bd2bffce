// The forward proxy deliveries leave through (EGRESS_PROXY_URL): https targets through a CONNECT
// tunnel (undici's ProxyAgent), http targets in absolute-form on a pool of connections to the proxy.
// Where the proxy itself fails (its connection, or its own answer to CONNECT), a typed error is
// raised at that spot, so the client can tell the proxy's failures from the target's without
// reading any message text.
import net from 'node:net';
import { Pool, ProxyAgent, buildConnector, type Dispatcher } from 'undici';
import { PROXY_FAILURE_STATUSES, type ProxyFailureReason } from '../domain/retry-policy.js';

export interface EgressProxyOptions {
  /** http://[user:pass@]host:port */
  url: string;
  /** EGRESS_NO_PROXY entries (lower-cased): hosts, .domains, IP literals, optional :port, or `*`. */
  noProxy: readonly string[];
}

/** The proxy failed before any target answered. undici hands it to the pending request unchanged. */
export class ProxyFailureError extends Error {
  readonly code = 'WEBHOOK_PROXY_FAILURE';
  constructor(
    readonly reason: ProxyFailureReason,
    message: string,
  ) {
    super(message);
    this.name = 'ProxyFailureError';
  }
}

/** The proxy answered CONNECT with a refusal of its own about the target (403 by policy, 500 unreachable, …). */
export class ProxyRejectedError extends Error {
  readonly code = 'WEBHOOK_PROXY_REJECTED';
  constructor(readonly statusCode: number) {
    super(`egress proxy answered CONNECT with HTTP ${statusCode}`);
    this.name = 'ProxyRejectedError';
  }
}

/** A failed connection to the proxy, as a proxy failure; the attempt's own abort passes unchanged. */
function connectFailure(err: Error): Error {
  if (err instanceof ProxyFailureError) return err;
  const raw = (err as { code?: unknown }).code;
  const code = typeof raw === 'string' ? raw : '';
  if (code === 'UND_ERR_ABORTED') return err;
  const timedOut = code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'ETIMEDOUT';
  const shown = /^[A-Z0-9_]{1,40}$/.test(code) ? ` (${code})` : '';
  return new ProxyFailureError(timedOut ? 'timeout' : 'refused', timedOut ? `egress proxy: connect timed out${shown}` : `egress proxy: could not connect${shown}`);
}

/**
 * NO_PROXY matching: `*` matches everything; `example.com`, `.example.com` and `*.example.com`
 * match that name and its subdomains; an IP literal matches itself; `:port` narrows an entry to it.
 */
export function bypassesProxy(hostname: string, port: string, noProxy: readonly string[]): boolean {
  const host = hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  for (const entry of noProxy) {
    if (entry === '*') return true;
    const m = /^(.*?)(?::(\d{1,5}))?$/.exec(entry.startsWith('[') ? entry.replace(/^\[([^\]]+)\]/, '$1') : entry);
    let name = m?.[1] ?? entry;
    const entryPort = m?.[2];
    // An IPv6 literal without brackets is all colons: the last group is not a port.
    if (entryPort !== undefined && net.isIPv6(entry) && !entry.startsWith('[')) name = entry;
    else if (entryPort !== undefined && entryPort !== port) continue;
    name = name.replace(/^\*?\./, '').replace(/\.$/, '');
    if (name === '') continue;
    if (host === name || (net.isIP(name) === 0 && host.endsWith(`.${name}`))) return true;
  }
  return false;
}

export interface ProxyLimits {
  connectTimeoutMs: number;
  attemptTimeoutMs: number;
  connections: number | null;
  /** See DeliveryClientOptions.testTrustedCa. */
  testTrustedCa?: string;
}

export interface ProxyRoutes {
  /** For https targets: CONNECT to the target through the proxy, then TLS end to end. */
  tunnel: Dispatcher;
  /** For http targets: requests in absolute-form to the proxy (path is the whole URL). */
  forward: Dispatcher;
  /** Proxy-Authorization for absolute-form requests; CONNECT carries it inside `tunnel`. */
  authorization?: string;
  /** Whether a target connects directly (EGRESS_NO_PROXY). */
  bypasses(hostname: string, port: string): boolean;
  close(): Promise<void>;
}

export function createProxyRoutes(proxy: EgressProxyOptions, limits: ProxyLimits): ProxyRoutes {
  const url = new URL(proxy.url);
  const authorization =
    url.username === '' ? undefined : `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')}`;
  // The credentials live in the header only, never in a URL undici might put in an error.
  const origin = url.origin;
  const baseConnect = buildConnector({ timeout: limits.connectTimeoutMs });
  const connect: buildConnector.connector = (options, callback) =>
    baseConnect(options, (err, socket) => (err ? callback(connectFailure(err), null) : callback(null, socket!)));
  const keepAlive = { keepAliveTimeout: 4_000, keepAliveMaxTimeout: 60_000 };
  const timeouts = { headersTimeout: limits.attemptTimeoutMs, bodyTimeout: limits.attemptTimeoutMs };

  const tunnel = new ProxyAgent({
    uri: origin,
    token: authorization,
    ...keepAlive,
    ...timeouts,
    connections: limits.connections,
    requestTls: { timeout: limits.connectTimeoutMs, ...(limits.testTrustedCa ? { ca: limits.testTrustedCa } : {}) },
    // A pool, not undici's default single client, so CONNECTs for different targets run side by side;
    // its connect() is where the proxy's answer to CONNECT is judged.
    clientFactory: (proxyOrigin) => {
      const pool = new Pool(proxyOrigin, { connect });
      const sendConnect = pool.connect.bind(pool) as (opts: Dispatcher.ConnectOptions) => Promise<Dispatcher.ConnectData>;
      pool.connect = (async (opts: Dispatcher.ConnectOptions) => {
        let data: Dispatcher.ConnectData;
        try {
          data = await sendConnect(opts);
        } catch (err) {
          throw err instanceof Error ? connectFailure(err) : err;
        }
        if (data.statusCode === 200) return data;
        data.socket.on('error', () => {}).destroy();
        const reason = PROXY_FAILURE_STATUSES[data.statusCode];
        throw reason ? new ProxyFailureError(reason, `egress proxy answered CONNECT with HTTP ${data.statusCode}`) : new ProxyRejectedError(data.statusCode);
      }) as typeof pool.connect;
      return pool;
    },
  });
  const forward = new Pool(origin, { connect, connections: limits.connections, ...keepAlive, ...timeouts });

  return {
    tunnel,
    forward,
    authorization,
    bypasses: (hostname, port) => bypassesProxy(hostname, port, proxy.noProxy),
    close: async () => void (await Promise.all([tunnel.close(), forward.close()])),
  };
}
