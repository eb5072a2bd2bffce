// Outbound HTTP for deliveries: one keep-alive undici Agent, an SSRF-checking connector that pins
// each socket to the address it checked, hard time limits and a bounded body read. send() never
// throws for anything the network or the receiver does; every failure becomes an AttemptOutcome.
import dns from 'node:dns/promises';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, buildConnector, errors as undiciErrors } from 'undici';
import type { AttemptOutcome, ErrorClass } from '../domain/retry-policy.js';
import { classifyAddress, isLocalhostName, targetRefusal } from './address-guard.js';

export interface LookupAddress {
  address: string;
  family: number;
}
/** Resolves a hostname to every address it has (like dns.lookup with all: true). */
export type LookupFn = (hostname: string) => Promise<readonly LookupAddress[]>;

export interface DeliveryClientOptions {
  allowPrivateTargets: boolean;
  connectTimeoutMs: number; // DNS + TCP + TLS handshake
  attemptTimeoutMs: number; // whole attempt: connect, headers and body
  maxResponseBytes: number; // read cap, e.g. 64 KiB
  excerptBytes: number; // stored excerpt, e.g. 2 KiB
  lookup?: LookupFn; // injectable for tests
  /**
   * Sockets per origin; default unlimited. Callers bound concurrency themselves (the dispatcher
   * admits at most maxConcurrency per endpoint), and a request waiting here for a socket would
   * spend its attempt timeout unsent and be recorded as the receiver's timeout.
   */
  connectionsPerOrigin?: number;
}
export interface DeliveryRequest {
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** POST for deliveries; reconciliation reads provider state with GET through the same guard. */
  method?: 'POST' | 'GET';
}
export interface DeliveryResult {
  outcome: AttemptOutcome;
  durationMs: number;
  responseExcerpt?: string;
}
export interface DeliveryClient {
  send(req: DeliveryRequest): Promise<DeliveryResult>;
  close(): Promise<void>;
}

/** Raised inside the connector; undici hands it to the pending request unchanged. */
class SsrfRefusedError extends Error {
  readonly code = 'WEBHOOK_SSRF_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'SsrfRefusedError';
  }
}
class AttemptTimeoutError extends Error {
  readonly code = 'WEBHOOK_ATTEMPT_TIMEOUT';
}

function assertAllowed(address: string, what: string, allowPrivate: boolean): void {
  // The address itself is not echoed: it may describe our internal network to a tenant.
  const refusal = targetRefusal(classifyAddress(address), allowPrivate);
  if (refusal !== undefined) throw new SsrfRefusedError(`${what} ${refusal}`);
}

/**
 * Picks the one address a new connection will use from a DNS answer. Every answer is checked, not
 * just the chosen one: a mixed public/private answer is a rebinding attempt, and with private
 * targets allowed an answer that includes link-local or metadata is still refused. IPv4 is preferred
 * because containers often lack an IPv6 route and we connect to exactly one address.
 */
export function selectAddress(addresses: readonly LookupAddress[], allowPrivate: boolean): string {
  const first = addresses.find((a) => net.isIPv4(a.address)) ?? addresses[0];
  // A non-IP answer (only possible from an injected lookup) would make net.connect resolve again.
  if (first === undefined || net.isIP(first.address) === 0) {
    throw Object.assign(new Error('no usable addresses'), { code: 'ENOTFOUND' });
  }
  for (const a of addresses) assertAllowed(a.address, 'hostname resolves to', allowPrivate);
  return first.address;
}

const defaultLookup: LookupFn = (hostname) => dns.lookup(hostname, { all: true });

export function createDeliveryClient(opts: DeliveryClientOptions): DeliveryClient {
  const lookup = opts.lookup ?? defaultLookup;
  const baseConnect = buildConnector({ timeout: opts.connectTimeoutMs });

  /** The one address this connection may use, or an error: checked here, connected to below. */
  async function resolveTarget(hostname: string): Promise<string> {
    const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
    // net.connect skips DNS for literals, so they must be judged here explicitly.
    if (net.isIP(host) !== 0) {
      assertAllowed(host, 'target is', opts.allowPrivateTargets);
      return host;
    }
    // localhost and *.localhost are loopback by definition (RFC 6761), whatever this host's
    // resolver says: refused before any DNS query, so a resolver that does not know them cannot
    // turn the refusal into a dns_failure that is retried for a day.
    if (!opts.allowPrivateTargets && isLocalhostName(host)) throw new SsrfRefusedError('target is a localhost name');
    const addresses = await withTimeout(lookup(host), opts.connectTimeoutMs);
    return selectAddress(addresses, opts.allowPrivateTargets);
  }

  const connect: buildConnector.connector = (options, callback) => {
    resolveTarget(options.hostname).then(
      // Only hostname is swapped: `host` still names the origin, so TLS SNI and certificate
      // checks use the real name while TCP goes to the checked address (no second DNS answer).
      (address) => baseConnect({ ...options, hostname: address }, callback),
      (err: unknown) => callback(err instanceof Error ? err : new Error('lookup failed'), null),
    ).catch((err: unknown) => callback(err instanceof Error ? err : new Error('connect failed'), null));
  };

  const agent = new Agent({
    connect,
    connections: opts.connectionsPerOrigin ?? null,
    keepAliveTimeout: 4_000, // below the common 5 s server idle timeout, to avoid reset races
    keepAliveMaxTimeout: 60_000,
    headersTimeout: opts.attemptTimeoutMs,
    bodyTimeout: opts.attemptTimeoutMs,
  });

  async function send(req: DeliveryRequest): Promise<DeliveryResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      return fail('invalid_target', 'endpoint URL is not a valid absolute URL', elapsed());
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return fail('invalid_target', 'endpoint URL scheme must be http or https', elapsed());
    }
    if (url.username !== '' || url.password !== '') {
      return fail('invalid_target', 'endpoint URL must not contain credentials', elapsed());
    }

    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      ac.abort(new AttemptTimeoutError('attempt timed out'));
    }, opts.attemptTimeoutMs);
    try {
      // No redirect interceptor is composed, so 3xx comes back as a plain response.
      const res = await agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: req.method ?? 'POST',
        headers: req.headers,
        body: req.body,
        signal: ac.signal,
      });
      const header = res.headers['retry-after'];
      const retryAfter = Array.isArray(header) ? header[0] : header;
      // The status line is the receiver's verdict; the body is only informational, so a body
      // that is cut off (cap, timeout, reset) still leaves the outcome as that status.
      const excerpt = await readExcerpt(res.body, opts.maxResponseBytes, opts.excerptBytes);
      const outcome: AttemptOutcome = { kind: 'response', statusCode: res.statusCode };
      if (retryAfter !== undefined) outcome.retryAfter = retryAfter.slice(0, 128);
      return { outcome, durationMs: elapsed(), responseExcerpt: excerpt };
    } catch (err) {
      const [errorClass, message] = timedOut
        ? (['attempt_timeout', `no complete response within ${opts.attemptTimeoutMs} ms`] as const)
        : classifyError(err);
      return fail(errorClass, message, elapsed());
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: () => agent.close() };
}

function fail(errorClass: ErrorClass, message: string, durationMs: number): DeliveryResult {
  return { outcome: { kind: 'error', errorClass, message: message.slice(0, 300) }, durationMs };
}

/**
 * Reads at most maxBytes, then destroys the stream (undici drops that socket instead of draining
 * a possibly endless body). Bodies under the cap are read to the end so the connection is reused.
 */
async function readExcerpt(body: AsyncIterable<Buffer> & { destroy(): unknown }, maxBytes: number, excerptBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of body) {
      const room = maxBytes - total;
      if (chunk.length >= room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        total = maxBytes;
        break; // ends the iteration, which destroys the body stream
      }
      chunks.push(chunk);
      total += chunk.length;
    }
  } catch {
    // Partial body: keep what arrived.
  } finally {
    body.destroy();
  }
  const head = Buffer.concat(chunks).subarray(0, Math.max(0, excerptBytes));
  // stream: true holds back a multi-byte character cut at the boundary instead of emitting U+FFFD;
  // NULs are dropped because PostgreSQL text columns cannot store them.
  return new TextDecoder('utf-8').decode(head, { stream: true }).replaceAll('\u0000', '');
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new undiciErrors.ConnectTimeoutError('DNS lookup timed out')), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e: unknown) => (clearTimeout(t), reject(e)),
    );
  });
}

const CODE_CLASSES: Record<string, [ErrorClass, string]> = {
  WEBHOOK_SSRF_REFUSED: ['ssrf_refused', 'refused: target is not a public address'],
  WEBHOOK_ATTEMPT_TIMEOUT: ['attempt_timeout', 'attempt timed out'],
  ECONNREFUSED: ['connection_refused', 'connection refused'],
  ECONNRESET: ['connection_reset', 'connection reset by peer'],
  EPIPE: ['connection_reset', 'connection closed while sending'],
  UND_ERR_SOCKET: ['connection_reset', 'connection closed before a complete response'],
  ENOTFOUND: ['dns_failure', 'hostname could not be resolved'],
  EAI_AGAIN: ['dns_failure', 'DNS lookup failed temporarily'],
  EAI_FAIL: ['dns_failure', 'DNS lookup failed'],
  EAI_NODATA: ['dns_failure', 'hostname has no addresses'],
  ENODATA: ['dns_failure', 'hostname has no addresses'],
  ESERVFAIL: ['dns_failure', 'DNS server failure'],
  UND_ERR_CONNECT_TIMEOUT: ['connect_timeout', 'connect timed out'],
  ETIMEDOUT: ['connect_timeout', 'connect timed out'],
  UND_ERR_HEADERS_TIMEOUT: ['attempt_timeout', 'timed out waiting for response headers'],
  UND_ERR_BODY_TIMEOUT: ['attempt_timeout', 'timed out reading the response body'],
  UND_ERR_HEADERS_OVERFLOW: ['malformed_response', 'response headers too large'],
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: ['malformed_response', 'response length mismatch'],
  UND_ERR_INVALID_ARG: ['invalid_target', 'request rejected by the HTTP client'],
};

/**
 * Maps an error to (class, message) by its code alone, looking through `cause` chains. Messages
 * are fixed text plus the code: never the error's own message, which can carry URLs or headers.
 */
export function classifyError(err: unknown): [ErrorClass, string] {
  if (err instanceof SsrfRefusedError) return ['ssrf_refused', `refused: ${err.message}`]; // our text
  // undici 7 can build parser errors whose code is undefined, so the type decides, not the code.
  if (err instanceof undiciErrors.HTTPParserError) {
    const code = typeof err.code === 'string' && /^HPE_[A-Z_]{1,40}$/.test(err.code) ? ` (${err.code})` : '';
    return ['malformed_response', `malformed HTTP response${code}`];
  }
  let e: unknown = err;
  for (let depth = 0; depth < 4 && typeof e === 'object' && e !== null; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(code)) {
      const known = CODE_CLASSES[code];
      if (known) return [known[0], code.startsWith('WEBHOOK_') ? known[1] : `${known[1]} (${code})`];
      if (code.startsWith('HPE_')) return ['malformed_response', `malformed HTTP response (${code})`];
      if (/CERT|TLS|SSL/.test(code)) return ['network_other', `TLS error (${code})`];
    }
    e = (e as { cause?: unknown }).cause;
  }
  const top = err as { code?: unknown; name?: unknown } | null;
  const code = typeof top?.code === 'string' && /^[A-Za-z0-9_]{1,64}$/.test(top.code) ? ` (${top.code})` : '';
  return ['network_other', `network error${code}`];
}
