import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type AttemptResult,
  type ErrorClass,
  type RetryPolicy,
  RATE_LIMIT_FLOOR_MS,
  TIMEOUT_FLOOR_MS,
  backoffCapMs,
  backoffDelayMs,
  classify,
  decide,
  defaultRetryPolicy,
  parseRetryAfterMs,
  resolvePolicy,
} from '../../src/domain/retry-policy.js';

// A fixed policy, so these cases do not move when the defaults are tuned.
const policy: RetryPolicy = { maxAttempts: 8, baseDelayMs: 5_000, maxDelayMs: 3_600_000, maxEventAgeSeconds: 259_200, retryAfterMaxSeconds: 3_600 };
const now = new Date('2026-11-29T10:00:00Z');
const farDeadline = new Date(now.getTime() + 3 * 86_400_000);
const ctx = (over: Partial<Parameters<typeof decide>[1]> = {}) => ({
  attemptNumber: 1,
  now,
  deadline: farDeadline,
  policy,
  random: () => 0.5,
  ...over,
});
const res = (statusCode: number, retryAfter?: string): AttemptResult =>
  retryAfter === undefined ? { kind: 'response', statusCode } : { kind: 'response', statusCode, retryAfter };
const err = (errorClass: ErrorClass): AttemptResult => ({ kind: 'error', errorClass, message: 'x' });

describe('failure matrix', () => {
  const rows: [string, AttemptResult, ReturnType<typeof classify>][] = [
    ['200', res(200), 'success'],
    ['201', res(201), 'success'],
    ['204', res(204), 'success'],
    ['299', res(299), 'success'],
    ['connection refused', err('connection_refused'), 'retryable'],
    ['connection reset', err('connection_reset'), 'retryable'],
    ['dns failure', err('dns_failure'), 'retryable'],
    ['connect timeout', err('connect_timeout'), 'retryable'],
    ['attempt timeout', err('attempt_timeout'), 'retryable'],
    ['malformed response', err('malformed_response'), 'retryable'],
    ['network other', err('network_other'), 'retryable'],
    ['408', res(408), 'retryable'],
    ['429', res(429), 'retryable'],
    ['500', res(500), 'retryable'],
    ['502', res(502), 'retryable'],
    ['503', res(503), 'retryable'],
    ['599', res(599), 'retryable'],
    ['400', res(400), 'terminal'],
    ['401', res(401), 'terminal'],
    ['403', res(403), 'terminal'],
    ['404', res(404), 'terminal'],
    ['413', res(413), 'terminal'],
    ['422', res(422), 'terminal'],
    ['100', res(100), 'terminal'],
    ['301', res(301), 'terminal'],
    ['302', res(302), 'terminal'],
    ['307', res(307), 'terminal'],
    ['ssrf refused', err('ssrf_refused'), 'terminal'],
    ['invalid target', err('invalid_target'), 'terminal'],
    ['410', res(410), 'gone'],
  ];
  it.each(rows)('%s → %s', (_name, outcome, expected) => {
    expect(classify(outcome)).toBe(expected);
    const d = decide(outcome, ctx());
    if (expected === 'success') expect(d).toEqual({ action: 'succeed' });
    if (expected === 'retryable') expect(d.action).toBe('retry');
    if (expected === 'terminal') expect(d).toMatchObject({ action: 'dead', reason: 'terminal', disableEndpoint: false });
    if (expected === 'gone') expect(d).toMatchObject({ action: 'dead', reason: 'terminal', disableEndpoint: true });
  });
});

describe('backoffDelayMs (equal jitter)', () => {
  it('grows exponentially and respects [cap/2, cap]', () => {
    expect(backoffDelayMs(1, policy, () => 0)).toBe(2_500);
    expect(backoffDelayMs(1, policy, () => 0.999999)).toBe(5_000);
    expect(backoffDelayMs(2, policy, () => 0)).toBe(5_000);
    expect(backoffDelayMs(4, policy, () => 0.999999)).toBe(40_000);
    expect(backoffDelayMs(30, policy, () => 0)).toBe(1_800_000);
    // 0.999999 of the upper half lands just under the cap (within 2 ms)
    expect(backoffDelayMs(30, policy, () => 0.999999)).toBeGreaterThan(3_599_997);
    expect(backoffDelayMs(10_000, policy, () => 0.999999)).toBeLessThanOrEqual(3_600_000);
    expect(backoffDelayMs(10_000, policy, () => 1 - Number.EPSILON)).toBe(3_600_000);
  });
  it('tolerates a misbehaving random source', () => {
    for (const r of [1, 2, -1, Number.NaN]) {
      const d = backoffDelayMs(3, policy, () => r);
      expect(d).toBeGreaterThanOrEqual(10_000);
      expect(d).toBeLessThanOrEqual(20_000);
    }
  });
  it('stays within bounds for any attempt, policy and random value', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 200 }),
        fc.integer({ min: 0, max: 600_000 }),
        fc.integer({ min: 0, max: 86_400_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (n, base, maxDelay, r) => {
          const p = { ...policy, baseDelayMs: base, maxDelayMs: maxDelay };
          const cap = backoffCapMs(n, p);
          const d = backoffDelayMs(n, p, () => r);
          expect(cap).toBe(Math.min(maxDelay, base * 2 ** (n - 1)));
          expect(Number.isInteger(d)).toBe(true);
          expect(d).toBeGreaterThanOrEqual(Math.floor(cap / 2));
          expect(d).toBeLessThanOrEqual(cap);
        },
      ),
      { numRuns: 2_000 },
    );
  });
});

describe('parseRetryAfterMs', () => {
  it.each([
    ['120', 120_000],
    [' 0 ', 0],
    ['Sun, 29 Nov 2026 10:00:30 GMT', 30_000],
    ['Sunday, 29-Nov-26 10:01:00 GMT', 60_000],
    ['Sun Nov 29 10:00:05 2026', 5_000],
    ['Sun, 29 Nov 2026 09:00:00 GMT', 0], // past date: retry now
  ])('%s → %d ms', (value, ms) => expect(parseRetryAfterMs(value, now)).toBe(ms));
  it.each([undefined, '', '-5', '1.5', 'soon', '2', 'Tomorrow', '5s', '0x10', 'Sun, 32 Nov 2026 10:00:00 GMT'])(
    'garbage %s → undefined',
    (value) => {
      if (value === '2') expect(parseRetryAfterMs(value, now)).toBe(2_000); // plain seconds are fine
      else expect(parseRetryAfterMs(value, now)).toBeUndefined();
    },
  );
});

describe('decide: delays', () => {
  it('Retry-After seconds raises the delay above backoff', () => {
    const d = decide(res(503, '600'), ctx());
    expect(d).toMatchObject({ action: 'retry', delayMs: 600_000, reason: 'http_503' });
    if (d.action === 'retry') expect(d.at.getTime()).toBe(now.getTime() + 600_000);
  });
  it('Retry-After HTTP date is honoured on 429', () => {
    const d = decide(res(429, 'Sun, 29 Nov 2026 10:05:00 GMT'), ctx());
    expect(d).toMatchObject({ action: 'retry', delayMs: 300_000 });
  });
  it('Retry-After never shortens backoff', () => {
    expect(decide(res(503, '1'), ctx({ attemptNumber: 5 }))).toMatchObject({ delayMs: 60_000 });
  });
  it('Retry-After is clamped to retryAfterMaxSeconds', () => {
    expect(decide(res(503, '31536000'), ctx())).toMatchObject({ action: 'retry', delayMs: 3_600_000 });
    const p = { ...policy, retryAfterMaxSeconds: 60 };
    expect(decide(res(429, '600'), ctx({ policy: p }))).toMatchObject({ delayMs: 60_000 });
  });
  it('429 without Retry-After and timeouts get a floor', () => {
    expect(decide(res(429), ctx())).toMatchObject({ delayMs: RATE_LIMIT_FLOOR_MS });
    expect(decide(res(429, 'garbage'), ctx())).toMatchObject({ delayMs: RATE_LIMIT_FLOOR_MS });
    expect(decide(err('attempt_timeout'), ctx())).toMatchObject({ delayMs: TIMEOUT_FLOOR_MS });
    expect(decide(err('connect_timeout'), ctx())).toMatchObject({ delayMs: TIMEOUT_FLOOR_MS });
    expect(decide(err('connection_refused'), ctx())).toMatchObject({ delayMs: 3_750 });
    // the floor never exceeds the endpoint's own ceiling
    const p = { ...policy, baseDelayMs: 100, maxDelayMs: 1_000 };
    expect(decide(res(429), ctx({ policy: p }))).toMatchObject({ delayMs: 1_000 });
  });
});

describe('decide: limits', () => {
  it('dead-letters with max_attempts once the last attempt failed', () => {
    expect(decide(res(500), ctx({ attemptNumber: 7 })).action).toBe('retry');
    expect(decide(res(500), ctx({ attemptNumber: 8 }))).toMatchObject({ action: 'dead', reason: 'max_attempts', disableEndpoint: false });
    expect(decide(res(500), ctx({ attemptNumber: 9 }))).toMatchObject({ reason: 'max_attempts' });
  });
  it('a success on the last attempt still succeeds; a terminal one is still terminal', () => {
    expect(decide(res(200), ctx({ attemptNumber: 8 }))).toEqual({ action: 'succeed' });
    expect(decide(res(404), ctx({ attemptNumber: 8 }))).toMatchObject({ reason: 'terminal' });
  });
  it('a retry that would land past the maximum age dead-letters now', () => {
    const deadline = new Date(now.getTime() + 4_000);
    expect(decide(res(500), ctx({ deadline, random: () => 0 })).action).toBe('retry'); // 2.5 s fits
    expect(decide(res(500), ctx({ deadline, random: () => 0.99 }))).toMatchObject({ action: 'dead', reason: 'max_age' });
    expect(decide(res(503, '60'), ctx({ deadline }))).toMatchObject({ reason: 'max_age' });
    expect(decide(res(500), ctx({ deadline: new Date(now.getTime() - 1) }))).toMatchObject({ reason: 'max_age' });
  });
  it('details are informative and bounded', () => {
    const long: AttemptResult = { kind: 'error', errorClass: 'ssrf_refused', message: 'y'.repeat(1_000) };
    const d = decide(long, ctx());
    if (d.action !== 'dead') throw new Error('expected dead');
    expect(d.detail.length).toBeLessThanOrEqual(300);
    expect(decide(res(410), ctx())).toMatchObject({ detail: expect.stringContaining('410') });
  });
});

describe('resolvePolicy', () => {
  it('overlays valid fields and ignores absent or invalid ones', () => {
    expect(resolvePolicy(defaultRetryPolicy)).toEqual(defaultRetryPolicy);
    expect(resolvePolicy(defaultRetryPolicy, { maxAttempts: 3, baseDelayMs: 1_000 })).toEqual({
      ...defaultRetryPolicy,
      maxAttempts: 3,
      baseDelayMs: 1_000,
    });
    const bad = { maxAttempts: 0, baseDelayMs: -1, maxDelayMs: Number.NaN, maxEventAgeSeconds: undefined } as Partial<RetryPolicy>;
    expect(resolvePolicy(defaultRetryPolicy, bad)).toEqual(defaultRetryPolicy);
  });
  it('never lets maxDelayMs undercut baseDelayMs', () => {
    expect(resolvePolicy(defaultRetryPolicy, { baseDelayMs: 10_000, maxDelayMs: 1_000 })).toMatchObject({ maxDelayMs: 10_000 });
  });
  it('does not mutate the defaults', () => {
    resolvePolicy(defaultRetryPolicy, { maxAttempts: 2 });
    expect(defaultRetryPolicy.maxAttempts).toBe(24);
  });
});
