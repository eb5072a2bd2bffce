import autocannon from 'autocannon';
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { epochMs } from './clock.js';
import type { PreparedRequest } from './payload.js';
import { percentile } from './stats.js';

/**
 * Load generators, all running in the bench process (never in the platform's):
 * - closedLoop: autocannon at a fixed number of connections for a fixed time (maximum throughput);
 * - paced: an open-loop undici client that starts requests at a fixed rate, evenly spaced, and
 *   measures each from its scheduled start (so queueing behind a slow response is counted);
 * - list: an undici client that sends a fixed list once, for work that must be counted exactly.
 */

export interface ClosedLoopResult {
  rps: number;
  ok: number;
  failed: number;
  statusCodes: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
  seconds: number;
}

/**
 * Maximum throughput with `connections` connections for `seconds`. `next` hands out a distinct
 * request each time it is called (autocannon's setupRequest runs once per request).
 */
export async function closedLoop(url: string, next: () => PreparedRequest, connections: number, seconds: number): Promise<ClosedLoopResult> {
  const result = await autocannon({
    url,
    connections,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          const r = next();
          // A copy: autocannon writes Content-Length into the headers object it is given.
          return { ...req, method: 'POST', path: r.path, headers: { ...r.headers }, body: r.body };
        },
      },
    ],
  });
  const statusCodes = Object.fromEntries(Object.entries(result.statusCodeStats).map(([code, s]) => [code, s.count]));
  return {
    rps: result['2xx'] / result.duration,
    ok: result['2xx'],
    failed: result.non2xx + result.errors + result.timeouts,
    statusCodes,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    seconds: result.duration,
  };
}

export interface PacedResult {
  sent: number;
  ok: number;
  failed: number;
  statusCodes: Record<string, number>;
  /** Milliseconds from each request's scheduled start to its complete response. */
  latenciesMs: number[];
  /** Epoch milliseconds of the schedule's start: request i was due at startedAt + i × 1000 / rate. */
  startedAt: number;
  /** Requests started per second (the schedule as kept by the client). */
  achievedRate: number;
  /**
   * 2xx answers per second, from the start to the last answer: below `rate` when the platform (or
   * the connection limit) does not take the offered rate, and requests queue before being answered.
   */
  answeredRate: number;
}

export interface PacedOptions {
  rate: number;
  seconds: number;
  connections: number;
  /** Called with each complete response; `at` is epochMs() when the response had fully arrived. */
  onResponse?: (request: PreparedRequest, status: number, body: string, at: number, index: number) => void;
}

/** Starts `rate` requests per second, evenly spaced, whether or not earlier ones have finished. */
export async function paced(baseUrl: string, next: () => PreparedRequest, opts: PacedOptions): Promise<PacedResult> {
  const pool = new Pool(baseUrl, { connections: opts.connections, pipelining: 1 });
  const total = Math.round(opts.rate * opts.seconds);
  const intervalMs = 1000 / opts.rate;
  const latenciesMs: number[] = new Array(total);
  const statusCodes: Record<string, number> = {};
  let ok = 0;
  let failed = 0;
  let lastAnswer = 0;
  const inFlight: Array<Promise<void>> = [];
  const start = performance.now();
  const fire = (index: number) => {
    const scheduled = start + index * intervalMs;
    const request = next();
    return pool
      .request({ method: 'POST', path: request.path, headers: request.headers, body: request.body })
      .then(async (res) => {
        const body = await res.body.text();
        const at = epochMs();
        lastAnswer = performance.now();
        latenciesMs[index] = lastAnswer - scheduled;
        statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
        if (res.statusCode >= 200 && res.statusCode < 300) ok++;
        else failed++;
        opts.onResponse?.(request, res.statusCode, body, at, index);
      })
      .catch(() => {
        latenciesMs[index] = performance.now() - scheduled;
        failed++;
      });
  };
  let sent = 0;
  while (sent < total) {
    const due = Math.min(total, Math.floor((performance.now() - start) / intervalMs) + 1);
    while (sent < due) inFlight.push(fire(sent++));
    const wait = start + sent * intervalMs - performance.now();
    await new Promise((resolve) => (wait > 1 ? setTimeout(resolve, wait - 0.5) : setImmediate(resolve)));
  }
  const elapsed = (performance.now() - start) / 1000;
  await Promise.all(inFlight);
  await pool.close();
  return { sent, ok, failed, statusCodes, latenciesMs, startedAt: performance.timeOrigin + start, achievedRate: sent / elapsed, answeredRate: ok / ((lastAnswer - start) / 1000) };
}

export interface ListResult {
  statusCodes: Record<string, number>;
  /** The `status` field of each JSON answer, e.g. accepted / duplicate. */
  outcomes: Record<string, number>;
  seconds: number;
}

/**
 * Sends every request of the list exactly once, `connections` at a time, in list order. Once
 * `signal` is aborted no further request is started; those in flight are completed.
 */
export async function sendList(baseUrl: string, requests: readonly PreparedRequest[], connections: number, signal?: AbortSignal): Promise<ListResult> {
  const pool = new Pool(baseUrl, { connections, pipelining: 1 });
  const statusCodes: Record<string, number> = {};
  const outcomes: Record<string, number> = {};
  let nextIndex = 0;
  const started = performance.now();
  const loop = async () => {
    for (;;) {
      if (signal?.aborted) return;
      const request = requests[nextIndex++];
      if (request === undefined) return;
      const res = await pool.request({ method: 'POST', path: request.path, headers: request.headers, body: request.body });
      const text = await res.body.text();
      statusCodes[res.statusCode] = (statusCodes[res.statusCode] ?? 0) + 1;
      try {
        const status = String((JSON.parse(text) as { status?: unknown }).status);
        outcomes[status] = (outcomes[status] ?? 0) + 1;
      } catch {
        outcomes.unparsable = (outcomes.unparsable ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, loop));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  return { statusCodes, outcomes, seconds };
}

export const p99 = (samples: readonly number[]) => percentile(samples, 99);

/**
 * Round trips of a bare HTTP request to `url` (a receiver port that answers at once), one every
 * `everyMs`, until `signal` aborts: what any request on this machine waits for the CPU at that
 * moment, with no platform in its path. A floor for latencies measured under the same load.
 */
export async function probeRoundTrips(url: string, everyMs: number, signal: AbortSignal): Promise<number[]> {
  const target = new URL(url);
  const pool = new Pool(target.origin, { connections: 1 });
  const rtts: number[] = [];
  try {
    while (!signal.aborted) {
      const started = performance.now();
      const res = await pool.request({ path: target.pathname, method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
      await res.body.dump();
      rtts.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
  } finally {
    await pool.close();
  }
  return rtts;
}
