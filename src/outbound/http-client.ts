// Outbound HTTP for deliveries: one keep-alive undici Agent, an SSRF-checking connector that pins
// each socket to the address it checked, hard time limits and a bounded body read. send() never
// throws for anything the network or the receiver does; every failure becomes an AttemptResult, or
// a ProxyFailure when the egress proxy (egress-proxy.ts) failed before any target answered.
import dns from 'node:dns/promises';
import { EventEmitter } from 'node:events';
import net from 'node:net';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { Agent, buildConnector, errors as undiciErrors } from 'undici';
import type { AttemptResult, ErrorClass, ProxyFailure, ProxyFailureReason } from '../domain/retry-policy.js';
import { RecentMap } from '../domain/recent.js';
import { metrics } from '../metrics/registry.js';
import { classifyAddress, isLocalhostName, targetRefusal } from './address-guard.js';
import type { EndpointTls } from '../domain/endpoint-tls.js';
import { createProxyRoutes, ProxyFailureError, ProxyRejectedError, type EgressProxyOptions } from './egress-proxy.js';
import { EndpointTlsAgents, type AttemptTls } from './tls-agents.js';
import { classifyError, classifyMutualTlsError, SsrfRefusedError } from './error-classes.js';
import { holdsNul } from '../domain/text.js';

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
  /** EGRESS_PROXY_URL and EGRESS_NO_PROXY; unset: every request connects directly. */
  proxy?: EgressProxyOptions;
  /** Tests only: CA certificates (PEM) that https targets may chain to, instead of the system's. */
  testTrustedCa?: string;
}
export interface DeliveryRequest {
  url: string;
  headers: Record<string, string>;
  body?: string;
  /** POST for deliveries; reconciliation reads provider state with GET through the same guard. */
  method?: 'POST' | 'GET';
  /** The endpoint's mutual TLS settings: the attempt goes over that endpoint's own connections. */
  tls?: AttemptTls;
}
export interface DeliveryResult {
  outcome: AttemptResult | ProxyFailure;
  durationMs: number;
  responseExcerpt?: string;
}
export interface DeliveryClient {
  send(req: DeliveryRequest): Promise<DeliveryResult>;
  close(): Promise<void>;
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
  const systemCa = opts.testTrustedCa ? { ca: opts.testTrustedCa } : {};

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

  /**
   * A connector that checks and pins each address; with mutual TLS it presents the endpoint's
   * client certificate, and a CA bundle replaces the system roots (a private CA is the only
   * authority that endpoint's receiver answers to).
   */
  const connectorFor = (tls?: EndpointTls): buildConnector.connector => {
    const baseConnect = buildConnector({
      timeout: opts.connectTimeoutMs,
      ...systemCa,
      ...(tls && { cert: tls.clientCertificate, key: tls.clientKey, ...(tls.caCertificates !== undefined && { ca: tls.caCertificates }) }),
    });
    return (options, callback) => {
      resolveTarget(options.hostname).then(
      // Only hostname is swapped: `host` still names the origin, so TLS SNI and certificate
      // checks use the real name while TCP goes to the checked address (no second DNS answer).
        (address) => baseConnect({ ...options, hostname: address }, callback),
        (err: unknown) => callback(err instanceof Error ? err : new Error('lookup failed'), null),
      ).catch((err: unknown) => callback(err instanceof Error ? err : new Error('connect failed'), null));
    };
  };

  const agentFor = (tls?: EndpointTls) =>
    new Agent({
      connect: connectorFor(tls),
      connections: opts.connectionsPerOrigin ?? null,
      keepAliveTimeout: 4_000, // below the common 5 s server idle timeout, to avoid reset races
      keepAliveMaxTimeout: 60_000,
      headersTimeout: opts.attemptTimeoutMs,
      bodyTimeout: opts.attemptTimeoutMs,
    });
  const agent = agentFor();
  const tlsAgents = new EndpointTlsAgents(agentFor);

  const proxy =
    opts.proxy &&
    createProxyRoutes(opts.proxy, {
      connectTimeoutMs: opts.connectTimeoutMs,
      attemptTimeoutMs: opts.attemptTimeoutMs,
      connections: opts.connectionsPerOrigin ?? null,
      testTrustedCa: opts.testTrustedCa,
    });

  async function send(req: DeliveryRequest): Promise<DeliveryResult> {
    const started = performance.now();
    const elapsed = () => Math.round(performance.now() - started);
    const target = targetOf(req.url);
    if ('refusal' in target) return fail('invalid_target', target.refusal, elapsed());
    const viaProxy = proxy !== undefined && !proxy.bypasses(target.hostname, target.port);
    if (req.tls && !target.secure) return fail('invalid_target', 'mutual TLS requires an https URL', elapsed());
    // The tunnel's TLS settings are the proxy's, shared by every endpoint: a client certificate is
    // never sent through it, and the attempt says so rather than going out without one.
    if (req.tls && viaProxy) return fail('invalid_target', 'mutual TLS is not supported through the egress proxy; list this host in EGRESS_NO_PROXY', elapsed());

    const deadline = new AttemptDeadline();
    const timer = setTimeout(() => deadline.fire(new AttemptTimeoutError('attempt timed out')), opts.attemptTimeoutMs);
    try {
      // The proxy connects to the target itself, so the guard judges the target here, before the
      // request; the proxy resolves the name again (what it must enforce: docs/security.md).
      if (viaProxy) await resolveTarget(target.hostname);
      const request = { method: req.method ?? 'POST', body: req.body, signal: deadline } as const;
      // No redirect interceptor is composed, so 3xx comes back as a plain response.
      const res = !viaProxy
        ? await (req.tls ? tlsAgents.agentFor(req.tls) : agent).request({ ...request, origin: target.origin, path: target.path, headers: req.headers })
        : target.secure
          ? await proxy.tunnel.request({ ...request, origin: target.origin, path: target.path, headers: req.headers })
          : await proxy.forward.request({
              ...request,
              path: `${target.origin}${target.path}`, // absolute-form
              headers: { ...req.headers, host: target.host, ...(proxy.authorization ? { 'proxy-authorization': proxy.authorization } : {}) },
            });
      // In absolute-form only the proxy answers 407; its 502-504 cannot be told from the target's.
      if (viaProxy && !target.secure && res.statusCode === 407) {
        res.body.on('error', () => {}).destroy();
        return proxyFailed('auth_required', 'egress proxy answered HTTP 407', elapsed());
      }
      const header = res.headers['retry-after'];
      const retryAfter = Array.isArray(header) ? header[0] : header;
      // The status line is the receiver's verdict; the body is only informational, so a body
      // that is cut off (cap, timeout, reset) still leaves the outcome as that status.
      const excerpt = await readExcerpt(res.body, opts.maxResponseBytes, opts.excerptBytes);
      const outcome: AttemptResult = { kind: 'response', statusCode: res.statusCode };
      if (retryAfter !== undefined) outcome.retryAfter = retryAfter.slice(0, 128);
      return { outcome, durationMs: elapsed(), responseExcerpt: excerpt };
    } catch (err) {
      if (err instanceof ProxyFailureError) return proxyFailed(err.reason, err.message, elapsed());
      const [errorClass, message] = deadline.aborted
        ? (['attempt_timeout', `no complete response within ${opts.attemptTimeoutMs} ms`] as const)
        : req.tls
          ? classifyMutualTlsError(err)
          : classifyError(err);
      return fail(errorClass, message, elapsed());
    } finally {
      clearTimeout(timer);
    }
  }

  return { send, close: async () => void (await Promise.all([agent.close(), tlsAgents.close(), proxy?.close()])) };
}

/** Counted here, where it is seen, for deliveries and provider polls alike. */
function proxyFailed(reason: ProxyFailureReason, message: string, durationMs: number): DeliveryResult {
  metrics.egressProxyFailures.inc({ reason });
  return { outcome: { kind: 'proxy_failure', reason, message: message.slice(0, 300) }, durationMs };
}

function fail(errorClass: ErrorClass, message: string, durationMs: number): DeliveryResult {
  return { outcome: { kind: 'error', errorClass, message: message.slice(0, 300) }, durationMs };
}

/**
 * The attempt's deadline as undici takes a signal (an EventEmitter with `aborted` and `reason`):
 * an AbortController per attempt cost more than the rest of the request's bookkeeping in profiles.
 */
class AttemptDeadline extends EventEmitter {
  aborted = false;
  reason: Error | undefined;

  fire(reason: Error): void {
    this.aborted = true;
    this.reason = reason;
    this.emit('abort');
  }
}

type Target = { origin: string; path: string; host: string; hostname: string; port: string; secure: boolean } | { refusal: string };

/** Targets by endpoint URL: a worker sends to the same few URLs all day, and parsing each showed in profiles. */
const targets = new RecentMap<Target>(10_000);

/** Where a request for `url` goes, or why it may not go anywhere. */
function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    target = parseTarget(url);
    targets.set(url, target);
  }
  return target;
}

function parseTarget(raw: string): Target {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { refusal: 'endpoint URL is not a valid absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { refusal: 'endpoint URL scheme must be http or https' };
  if (url.username !== '' || url.password !== '') return { refusal: 'endpoint URL must not contain credentials' };
  const secure = url.protocol === 'https:';
  const port = url.port || (secure ? '443' : '80');
  return { origin: url.origin, path: `${url.pathname}${url.search}`, host: url.host, hostname: url.hostname, port, secure };
}

/**
 * Reads at most maxBytes, then destroys the stream (undici drops that socket instead of draining
 * a possibly endless body). Bodies under the cap are read to the end so the connection is reused.
 * An error or abort while reading keeps what arrived.
 */
function readExcerpt(body: Readable, maxBytes: number, excerptBytes: number): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      body.off('data', onData);
      body.destroy();
      resolve(excerptOf(chunks, excerptBytes));
    };
    const onData = (chunk: Buffer) => {
      const room = maxBytes - total;
      if (chunk.length >= room) {
        if (room > 0) chunks.push(chunk.subarray(0, room));
        finish();
        return;
      }
      chunks.push(chunk);
      total += chunk.length;
    };
    body.on('data', onData);
    body.once('end', finish);
    body.once('error', finish);
    body.once('close', finish);
  });
}

/**
 * The first `excerptBytes` as text. A character the cut splits is left out rather than turned
 * into U+FFFD; NULs are dropped because PostgreSQL text columns cannot store them.
 */
export function excerptOf(chunks: Buffer[], excerptBytes: number): string {
  if (chunks.length === 0 || excerptBytes <= 0) return '';
  const head = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).subarray(0, excerptBytes);
  const text = head.toString('utf8', 0, completeUtf8Length(head));
  return holdsNul(text) ? text.replaceAll('\u0000', '') : text;
}

/** Length of `buf` without a UTF-8 sequence that its end cuts short. */
function completeUtf8Length(buf: Buffer): number {
  // The last lead byte within the last four bytes, and how long the sequence it starts should be.
  for (let i = buf.length - 1; i >= 0 && i >= buf.length - 4; i--) {
    const b = buf[i]!;
    if (b < 0x80) return buf.length; // ASCII: nothing cut
    if (b < 0xc0) continue; // continuation byte: keep looking for its lead
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2;
    return buf.length - i < need ? i : buf.length;
  }
  return buf.length;
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

export { classifyError, classifyMutualTlsError };
