import { setTimeout as sleep } from 'node:timers/promises';
import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, withSetupApi, type BenchContext } from '../lib/context.js';
import { epochMs } from '../lib/clock.js';
import { paced, type PacedResult } from '../lib/load.js';
import { publishRequest } from '../lib/payload.js';
import type { Arrival } from '../lib/receiver.js';
import { median, percentile, round } from '../lib/stats.js';

export interface LatencyResult {
  p50Ms: number;
  p99Ms: number;
  /** p99 over the first seconds of a process that has just reported ready (see coldStart). */
  coldP99Ms: number;
  details: Record<string, unknown>;
}

/** A steady stream of events published by one tenant. */
export interface StreamSpec {
  rate: number;
  seconds: number;
  /** Events sent in the first seconds are left out of the measurement (JIT and pool warm-up). */
  warmupSeconds: number;
  /** How long to wait for the last deliveries after the last publish; later ones count as lower bounds. */
  drainSeconds: number;
  eventType: (n: number) => string;
  /** How many endpoints each event goes to. */
  deliveriesPerEvent: number;
  /** Client connections for publishing; 20 unless given. */
  connections?: number;
}

export interface StreamLatency {
  /** 202 → receiver in ms, one per delivery of a measured event (see measureStream). */
  latencies: number[];
  /** When each latency's 202 arrived (epoch ms), in the order of `latencies`. */
  ackedAt: number[];
  notArrived: number;
  sent: PacedResult;
  /** Per measured event that arrived: its 202 and its first arrival (epoch ms), for splitting the path. */
  arrivals: Array<{ eventId: string; ackAt: number; arrivedAt: number }>;
}

/**
 * Publishes a stream with POST /v1/events, evenly spaced (open loop), and measures each delivery:
 * the receiver's arrival time minus the moment the 202 had arrived at the client, matched by
 * webhook-id (= event id), first arrival per endpoint only. Both clocks are the same machine's,
 * read with sub-millisecond resolution (epochMs). Arrivals of other events (warm-up, other tenants) are ignored.
 */
export async function measureStream(ctx: BenchContext, platformUrl: string, apiKey: string, spec: StreamSpec): Promise<StreamLatency> {
  let acked: Map<string, number>;
  let sent: PacedResult;
  let stoppedWaitingAt: number;
  const seen = new Map<string, number>();
  const latencies: number[] = [];
  const ackedAt: number[] = [];
  const firstArrivals: StreamLatency['arrivals'] = [];
  let matched = 0;
  const take = (arrivals: Arrival[]) => {
    for (const [id, at] of arrivals) {
      const ackAt = acked.get(id);
      if (ackAt === undefined) continue;
      const k = seen.get(id) ?? 0;
      if (k >= spec.deliveriesPerEvent) continue; // a repeat (retry) after the first arrival
      seen.set(id, k + 1);
      latencies.push(at - ackAt);
      ackedAt.push(ackAt);
      if (k === 0) firstArrivals.push({ eventId: id, ackAt, arrivedAt: at });
      matched++;
    }
  };
  await ctx.receiver.reset();
  await ctx.receiver.record(true);
  try {
    ({ acked, sent } = await publishPaced(ctx, platformUrl, apiKey, spec));
    // Matched only now that every 202 is known: an arrival can be recorded before its 202 is read.
    const expected = acked.size * spec.deliveriesPerEvent;
    const deadline = Date.now() + spec.drainSeconds * 1000;
    take(await ctx.receiver.arrivals());
    while (matched < expected && Date.now() < deadline) {
      await sleep(250);
      take(await ctx.receiver.arrivals());
    }
    stoppedWaitingAt = epochMs();
  } finally {
    await ctx.receiver.record(false);
  }
  // Deliveries that had not arrived when waiting stopped count with the time they had waited by
  // then: a lower bound, so a platform that falls behind cannot look faster by losing the tail.
  let notArrived = 0;
  for (const [id, ackAt] of acked) {
    for (let k = seen.get(id) ?? 0; k < spec.deliveriesPerEvent; k++) {
      latencies.push(stoppedWaitingAt - ackAt);
      ackedAt.push(ackAt);
      notArrived++;
    }
  }
  return { latencies, ackedAt, notArrived, sent, arrivals: firstArrivals };
}

/**
 * p50 / p99 per `windowMs` of acceptance time, from `from` (epochMs; the stream's first 202 unless
 * given): where a tail sits in time.
 */
export function latencyOverTime(r: StreamLatency, windowMs: number, from?: number): Array<{ fromMs: number; events: number; p50Ms: number; p99Ms: number }> {
  const first = from ?? Math.min(...r.ackedAt);
  const windows: number[][] = [];
  r.ackedAt.forEach((at, i) => (windows[Math.floor((at - first) / windowMs)] ??= []).push(r.latencies[i]!));
  return [...windows.entries()].filter(([, w]) => w).map(([k, w]) => ({ fromMs: k * windowMs, events: w!.length, p50Ms: round(percentile(w!, 50), 1), p99Ms: round(percentile(w!, 99), 1) }));
}

/**
 * Publishes the stream and returns, for every event accepted after the warm-up, epochMs() when
 * its 202 had fully arrived, by event id.
 */
export async function publishPaced(
  ctx: BenchContext,
  platformUrl: string,
  apiKey: string,
  spec: Pick<StreamSpec, 'rate' | 'seconds' | 'warmupSeconds' | 'eventType' | 'connections'>,
): Promise<{ acked: Map<string, number>; sent: PacedResult }> {
  const acked = new Map<string, number>();
  const warmupIndex = spec.rate * spec.warmupSeconds;
  let n = 0;
  const sent = await paced(platformUrl, () => publishRequest(apiKey, n, spec.eventType(n++), ctx.config.payloadBytes), {
    rate: spec.rate,
    seconds: spec.seconds,
    connections: spec.connections ?? 20,
    onResponse: (_req, status, body, at, index) => {
      if (status === 202 && index >= warmupIndex) acked.set((JSON.parse(body) as { id: string }).id, at);
    },
  });
  return { acked, sent };
}

/** A stream's p99, unrounded: the fairness ratios divide by it. */
export const streamP99 = (r: StreamLatency): number => percentile(r.latencies, 99);

/** The numbers behind a StreamLatency, as the details file shows them. */
export function streamSummary(r: StreamLatency) {
  return {
    achievedRate: round(r.sent.achievedRate),
    answeredRate: round(r.sent.answeredRate),
    publishFailed: r.sent.failed,
    measuredDeliveries: r.latencies.length,
    notArrivedWhenWaitingStopped: r.notArrived,
    p50Ms: round(percentile(r.latencies, 50), 1),
    p90Ms: round(percentile(r.latencies, 90), 1),
    p99Ms: round(streamP99(r), 1),
    maxMs: round(percentile(r.latencies, 100), 1),
    publishP99Ms: round(percentile(r.sent.latenciesMs, 99), 2),
  };
}

export interface LatencyOptions extends Pick<StreamSpec, 'rate' | 'seconds' | 'warmupSeconds' | 'drainSeconds' | 'connections'> {
  /** Tenant name, receiver path and profile name. */
  label: string;
  endpoints: number;
  /** `every`: each event goes to every endpoint; `roundRobin`: event n only to endpoint n % endpoints. */
  fanOut: 'every' | 'roundRobin';
  /** Leave the tables as they are (rows the caller set up stay); Redis and the receiver are reset. */
  keepTables?: boolean;
}

/**
 * One latency measurement in `npm start`'s role `all`, on a process of its own and a tenant of its
 * own with `endpoints` endpoints, each on its own receiver port. Failed publishes are reported in
 * the result, not thrown.
 */
export async function latencyRun(ctx: BenchContext, opts: LatencyOptions): Promise<StreamLatency> {
  return withStreamTarget(ctx, opts, (measure) => measure(opts));
}

/** Measures one stream at the given rate on a platform already running (see withStreamTarget). */
export type MeasureAt = (spec: Pick<StreamSpec, 'rate' | 'seconds' | 'warmupSeconds' | 'drainSeconds' | 'connections'>) => Promise<StreamLatency>;

/**
 * Starts one `all` process and one tenant with `endpoints` endpoints, and lets `work` measure as many
 * streams against them as it likes: one warm process, as a live platform is.
 */
export async function withStreamTarget<T>(ctx: BenchContext, opts: Omit<LatencyOptions, 'rate' | 'seconds' | 'warmupSeconds' | 'drainSeconds' | 'connections'>, work: (measure: MeasureAt) => Promise<T>): Promise<T> {
  await resetState(ctx, { keepTables: opts.keepTables ?? false });
  const platform = await startMeasured(ctx, 'all', `${opts.label}-all`);
  try {
    const roundRobin = opts.fanOut === 'roundRobin';
    const tenant = await createTenant(platform, ctx.settings.adminToken, {
      name: opts.label,
      endpointUrls: Array.from({ length: opts.endpoints }, (_, i) => ctx.receiver.okUrl(i, `${opts.label}/${i}`)),
      ...(roundRobin && { endpointEventTypes: Array.from({ length: opts.endpoints }, (_, i) => [`order.created.${i}`]) }),
    });
    return await work((spec) => {
      ctx.log(`${opts.label}: ${spec.rate} events/s for ${spec.seconds}s through role all, ${opts.endpoints} endpoint(s) (${opts.fanOut})`);
      return measureStream(ctx, platform.url, tenant.apiKey, {
        ...spec,
        eventType: roundRobin ? (n) => `order.created.${n % opts.endpoints}` : () => 'order.created',
        deliveriesPerEvent: roundRobin ? 1 : opts.endpoints,
      });
    });
  } finally {
    await platform.stop();
  }
}

/**
 * End-to-end latency: `npm start`-style role `all`, one tenant whose endpoints all receive every
 * event, events published at a steady rate; see measureStream. Then the same stream on a process
 * that has just started (coldStart).
 */
export async function runLatency(ctx: BenchContext): Promise<LatencyResult> {
  const cfg = ctx.config.latency;
  const r = await latencyRun(ctx, { label: 'latency', ...cfg, fanOut: 'every' });
  if (r.sent.failed > 0) throw new Error(`latency: ${r.sent.failed} of ${r.sent.sent} publishes failed: ${JSON.stringify(r.sent.statusCodes)}`);
  const summary = streamSummary(r);
  const starts: Array<Awaited<ReturnType<typeof coldStart>>> = [];
  for (let i = 0; i < cfg.coldStarts; i++) starts.push(await coldStart(ctx, i + 1));
  const p99s = starts.map((c) => c.p99Ms);
  const coldP99Ms = round(median(p99s), 1);
  return {
    p50Ms: summary.p50Ms,
    p99Ms: summary.p99Ms,
    coldP99Ms,
    // Every start is kept: the median is the field, the worst is beside it.
    details: { rate: cfg.rate, endpoints: cfg.endpoints, ...summary, cold: { p99Ms: coldP99Ms, worstP99Ms: Math.max(...p99s), starts } },
  };
}

/**
 * A fresh process's first seconds: the tenant and its endpoints are made through a setup api
 * process that then stops, so the measured `all` process has served nothing when the stream
 * starts, the moment it answers /healthz (the bench's "ready"). No warm-up is left out: every
 * event of the first `BENCH_LATENCY_COLD_SECONDS` counts.
 */
async function coldStart(ctx: BenchContext, start: number): Promise<ReturnType<typeof streamSummary> & { seconds: number; overTime: ReturnType<typeof latencyOverTime> }> {
  const cfg = ctx.config.latency;
  await resetState(ctx);
  const label = `latency-cold-${start}`;
  const tenant = await withSetupApi(ctx, (api) =>
    createTenant(api, ctx.settings.adminToken, { name: label, endpointUrls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `${label}/${i}`)) }),
  );
  const platform = await startMeasured(ctx, 'all', `${label}-all`);
  try {
    ctx.log(`${label}: ${cfg.rate} events/s for the first ${cfg.coldSeconds}s of a fresh role all process (start ${start} of ${cfg.coldStarts})`);
    const r = await measureStream(ctx, platform.url, tenant.apiKey, {
      rate: cfg.rate,
      seconds: cfg.coldSeconds,
      warmupSeconds: 0,
      drainSeconds: cfg.drainSeconds,
      eventType: () => 'order.created',
      deliveriesPerEvent: cfg.endpoints,
    });
    if (r.sent.failed > 0) throw new Error(`${label}: ${r.sent.failed} of ${r.sent.sent} publishes failed: ${JSON.stringify(r.sent.statusCodes)}`);
    const summary = streamSummary(r);
    ctx.log(`${label}: p99 ${summary.p99Ms} ms`);
    return { seconds: cfg.coldSeconds, ...summary, overTime: latencyOverTime(r, 250) };
  } finally {
    await platform.stop();
  }
}
