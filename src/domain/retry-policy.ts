// Retry policy for the platform retry chain: what an attempt's outcome means and when to try again.
// Pure: no I/O, no clock and no randomness of its own (both are injected), so every decision is
// reproducible in tests.

import type { AttemptDeadReason } from './delivery-status.js';

export interface RetryPolicy {
  maxAttempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  maxEventAgeSeconds: number;
  retryAfterMaxSeconds: number;
}

export type ErrorClass =
  | 'connection_refused'
  | 'connection_reset'
  | 'dns_failure'
  | 'connect_timeout'
  | 'attempt_timeout'
  | 'malformed_response'
  | 'ssrf_refused'
  | 'invalid_target'
  | 'proxy_rejected' // the egress proxy answered CONNECT with a status other than 2xx and the proxy failures below
  | 'tls_handshake_failed' // the receiver refused our client certificate, or we refused its certificate
  | 'network_other';

/**
 * Why the egress proxy itself failed, before any target answered: nothing reached the endpoint, so
 * such a try is not the endpoint's attempt (see ProxyFailure). Also the label of the metric.
 */
export const PROXY_FAILURE_REASONS = ['refused', 'timeout', 'auth_required', 'bad_gateway', 'unavailable', 'gateway_timeout'] as const;
export type ProxyFailureReason = (typeof PROXY_FAILURE_REASONS)[number];

/** The proxy's own answers to CONNECT that say it, not the target, failed. */
export const PROXY_FAILURE_STATUSES: Readonly<Record<number, ProxyFailureReason>> = Object.freeze({
  407: 'auth_required',
  502: 'bad_gateway',
  503: 'unavailable',
  504: 'gateway_timeout',
});

/**
 * A try that failed at the egress proxy: it uses up no attempt, does not move the circuit and never
 * disables an endpoint; the delivery goes back to pending on the platform's own schedule.
 */
export interface ProxyFailure {
  kind: 'proxy_failure';
  reason: ProxyFailureReason;
  message: string;
}

// A short fixed wait with equal jitter, independent of the endpoint's policy: the proxy is ours to
// fix, and a herd of deliveries held back by it should not all return in the same instant.
export const PROXY_RETRY_DELAY_MS = 5_000;

/** When a delivery held back by a proxy failure is due again: within [delay/2, delay] from now. */
export function proxyRetryAt(now: Date, random: () => number): Date {
  let r = random();
  if (!Number.isFinite(r) || r < 0) r = 0;
  if (r >= 1) r = 1 - Number.EPSILON;
  const half = PROXY_RETRY_DELAY_MS / 2;
  return new Date(now.getTime() + half + Math.floor(r * half));
}

/** What one HTTP try produced, before the policy judges it (see classify and decide). */
export type AttemptResult =
  | { kind: 'response'; statusCode: number; retryAfter?: string } // any HTTP response
  | { kind: 'error'; errorClass: ErrorClass; message: string }; // no usable response

export type Decision =
  | { action: 'succeed' }
  | { action: 'retry'; delayMs: number; at: Date; reason: string }
  | {
      action: 'dead';
      reason: AttemptDeadReason;
      disableEndpoint: boolean;
      detail: string;
    };

export type Classification = 'success' | 'retryable' | 'terminal' | 'gone';

// Defaults (the README documents them; env vars and each endpoint's retryPolicy override them).
// 24 attempts with a 5 s base doubling to a 2 h cap: the first 11 retries wait 5 s … 85 min, the
// other 12 about 2 h each, so with equal jitter the schedule spans 13.4 to 26.8 hours (about 20 h
// on average) and an endpoint that is down overnight still receives everything without a replay.
export const defaultRetryPolicy: Readonly<RetryPolicy> = Object.freeze({
  maxAttempts: 24,
  baseDelayMs: 5_000,
  maxDelayMs: 7_200_000,
  maxEventAgeSeconds: 259_200,
  retryAfterMaxSeconds: 3_600,
});

// Minimum wait after a 429 without a usable Retry-After, and after a timeout: the receiver told us
// (or showed us) it is overloaded, so a 2.5 s retry would only add load. Both are still capped by
// the policy's maxDelayMs so a tenant's explicit ceiling is never exceeded.
export const RATE_LIMIT_FLOOR_MS = 30_000;
export const TIMEOUT_FLOOR_MS = 10_000;

const RETRYABLE_ERRORS: ReadonlySet<ErrorClass> = new Set<ErrorClass>([
  'connection_refused',
  'connection_reset',
  'dns_failure',
  'connect_timeout',
  'attempt_timeout',
  'malformed_response',
  'proxy_rejected',
  'tls_handshake_failed',
  'network_other',
]);

/** The failure matrix. */
export function classify(outcome: AttemptResult): Classification {
  if (outcome.kind === 'error') {
    return RETRYABLE_ERRORS.has(outcome.errorClass) ? 'retryable' : 'terminal';
  }
  const s = outcome.statusCode;
  if (!Number.isInteger(s) || s < 100 || s > 599) return 'retryable'; // broken server, like malformed
  if (s >= 200 && s < 300) return 'success';
  if (s === 410) return 'gone';
  if (s === 408 || s === 429 || s >= 500) return 'retryable';
  return 'terminal'; // other 4xx, 1xx, 3xx (redirects are never followed)
}

/**
 * Exponential backoff with "equal jitter": cap = min(maxDelayMs, baseDelayMs * 2^(n-1)),
 * delay ∈ [floor(cap/2), cap]. Equal rather than full jitter because full jitter can draw ~0 ms,
 * which re-hits a receiver that just failed; equal jitter keeps a growing minimum spacing while
 * still spreading a herd of deliveries (e.g. after an endpoint outage) over half the window.
 */
export function backoffDelayMs(attemptNumber: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>, random: () => number): number {
  const cap = backoffCapMs(attemptNumber, policy);
  const half = Math.floor(cap / 2);
  let r = random();
  if (!Number.isFinite(r) || r < 0) r = 0;
  if (r >= 1) r = 1 - Number.EPSILON;
  return Math.min(cap, half + Math.floor(r * (cap - half + 1)));
}

/** Upper bound of backoffDelayMs for this attempt number (the lower bound is floor(cap / 2)). */
export function backoffCapMs(attemptNumber: number, policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>): number {
  const n = Number.isFinite(attemptNumber) ? Math.max(1, Math.floor(attemptNumber)) : 1;
  const exp = Math.min(n - 1, 60); // 2^60 * base already dwarfs any sane maxDelayMs
  return Math.max(0, Math.floor(Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** exp)));
}

const DELAY_SECONDS = /^\d+$/;
// RFC 9110 HTTP-date: IMF-fixdate, obsolete RFC 850 and asctime forms. Matched strictly first,
// because Date.parse alone accepts things like "-5" or "2" as years.
const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;
const RFC850_DATE = /^[A-Z][a-z]+, \d{2}-[A-Z][a-z]{2}-\d{2} \d{2}:\d{2}:\d{2} GMT$/;
const ASCTIME_DATE = /^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \d{4}$/;

/**
 * Retry-After as milliseconds from `now`. delay-seconds or HTTP-date; garbage, negative or
 * fractional numbers → undefined. A date in the past means "now" → 0.
 */
export function parseRetryAfterMs(value: string | undefined, now: Date): number | undefined {
  if (value === undefined) return undefined;
  const v = value.trim();
  if (v === '' || v.length > 64) return undefined;
  if (DELAY_SECONDS.test(v)) {
    const ms = Number(v) * 1000;
    return Number.isFinite(ms) ? ms : undefined;
  }
  let t: number;
  if (IMF_FIXDATE.test(v) || RFC850_DATE.test(v)) t = Date.parse(v);
  else if (ASCTIME_DATE.test(v)) t = Date.parse(`${v} GMT`); // asctime carries no zone; it is UTC
  else return undefined;
  if (!Number.isFinite(t)) return undefined;
  return Math.max(0, t - now.getTime());
}

export interface DecideContext {
  attemptNumber: number; // 1-based number of the attempt that produced `outcome`
  now: Date;
  deadline: Date; // event acceptance time + maxEventAgeSeconds
  policy: RetryPolicy;
  random: () => number;
}

export function decide(outcome: AttemptResult, ctx: DecideContext): Decision {
  const cls = classify(outcome);
  if (cls === 'success') return { action: 'succeed' };
  const detail = describe(outcome);
  if (cls === 'gone') return { action: 'dead', reason: 'terminal', disableEndpoint: true, detail };
  if (cls === 'terminal') return { action: 'dead', reason: 'terminal', disableEndpoint: false, detail };

  if (ctx.attemptNumber >= ctx.policy.maxAttempts) {
    return { action: 'dead', reason: 'max_attempts', disableEndpoint: false, detail };
  }
  const delayMs = retryDelayMs(outcome, ctx);
  const at = new Date(ctx.now.getTime() + delayMs);
  // A retry that would land past the maximum age dead-letters now rather than later.
  if (at.getTime() > ctx.deadline.getTime()) {
    return { action: 'dead', reason: 'max_age', disableEndpoint: false, detail };
  }
  return { action: 'retry', delayMs, at, reason: reasonOf(outcome) };
}

/** Backoff, raised to the floors, then to a (clamped) Retry-After: never shorter than asked. */
function retryDelayMs(outcome: AttemptResult, ctx: DecideContext): number {
  const { policy } = ctx;
  let delay = backoffDelayMs(ctx.attemptNumber, policy, ctx.random);
  let retryAfter: number | undefined;
  if (outcome.kind === 'response') {
    retryAfter = parseRetryAfterMs(outcome.retryAfter, ctx.now);
    if (outcome.statusCode === 429 && retryAfter === undefined) {
      delay = Math.max(delay, Math.min(RATE_LIMIT_FLOOR_MS, policy.maxDelayMs));
    }
  } else if (outcome.errorClass === 'attempt_timeout' || outcome.errorClass === 'connect_timeout') {
    delay = Math.max(delay, Math.min(TIMEOUT_FLOOR_MS, policy.maxDelayMs));
  }
  if (retryAfter !== undefined) {
    // Only the receiver's request is clamped: a hostile or buggy "Retry-After: 31536000" must not
    // park a delivery for a year, but our own backoff stays as computed.
    delay = Math.max(delay, Math.min(retryAfter, policy.retryAfterMaxSeconds * 1000));
  }
  return delay;
}

function reasonOf(outcome: AttemptResult): string {
  return outcome.kind === 'response' ? `http_${outcome.statusCode}` : outcome.errorClass;
}

function describe(outcome: AttemptResult): string {
  if (outcome.kind === 'response') {
    const s = outcome.statusCode;
    if (s === 410) return 'HTTP 410 Gone: endpoint disabled';
    if (s >= 300 && s < 400) return `HTTP ${s}: redirects are not followed`;
    return `HTTP ${s}`;
  }
  return `${outcome.errorClass}: ${outcome.message}`.slice(0, 300);
}

const MINIMUMS: Record<keyof RetryPolicy, number> = {
  maxAttempts: 1,
  baseDelayMs: 0,
  maxDelayMs: 0,
  maxEventAgeSeconds: 1,
  retryAfterMaxSeconds: 0,
};

/**
 * Defaults overlaid with a per-endpoint override. Request validation owns user-facing errors;
 * this is defensive: an absent, non-finite or out-of-range field falls back to the default, and
 * maxDelayMs is raised to baseDelayMs so the cap can never undercut the first delay.
 */
export function resolvePolicy(defaults: RetryPolicy, override?: Partial<RetryPolicy>): RetryPolicy {
  const out: RetryPolicy = { ...defaults };
  if (override) {
    for (const key of Object.keys(MINIMUMS) as (keyof RetryPolicy)[]) {
      const v = override[key];
      if (typeof v === 'number' && Number.isFinite(v) && v >= MINIMUMS[key]) out[key] = Math.floor(v);
    }
  }
  out.maxDelayMs = Math.max(out.maxDelayMs, out.baseDelayMs);
  return out;
}
