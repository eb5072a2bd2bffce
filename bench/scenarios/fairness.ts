import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createTenant } from '../lib/api.js';
import type { PlatformProcess } from '../lib/children.js';
import type { FairnessCase, Topology } from '../lib/config.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { epochMs } from '../lib/clock.js';
import { countRows } from '../lib/database.js';
import { PgSampler } from '../lib/pg-sampler.js';
import { busyShare, machineCpu } from '../lib/proc.js';
import { probeRoundTrips, sendList } from '../lib/load.js';
import { publishRequest } from '../lib/payload.js';
import { percentile, round } from '../lib/stats.js';
import { runBacklogCase, type BacklogCase } from './fairness-backlog.js';
import { latencyOverTime, measureStream, streamP99, streamSummary, type StreamLatency, type StreamSpec } from './latency.js';

export interface FairnessResult {
  /** B's p99 with A's burst / alone. */
  ratio: number;
  /** The same ratio for a bare HTTP request between two other processes: what the load alone does. */
  bareRequestRatio: number;
  /** ratio / bareRequestRatio: what the platform adds to what the machine's load does anyway. */
  platformRatio: number;
  /** B's p99 while A's 100,000-delivery backlog drains / alone. */
  backlogRatio: number;
  /** Which topology the four numbers above come from. */
  headline: Topology;
  details: Record<string, unknown>;
}

export const noisyEndpoints = 5;
/** A p99 below this is taken as this, so a near-zero baseline cannot inflate the ratio. */
export const p99FloorMs = 1;
/** How often the bare-request probe sends (see probeRoundTrips). */
const probeEveryMs = 20;

/** The platform as one scenario runs it: `url` takes the API calls, `processes` are all of it. */
export interface RunningPlatform {
  api: PlatformProcess;
  processes: PlatformProcess[];
  stop(): Promise<void>;
}

/** `separate`: an api and a worker process, as deployed; `all`: one process, as `npm start` runs. */
export async function startTopology(ctx: BenchContext, topology: Topology, label: string, env: Record<string, string> = {}): Promise<RunningPlatform> {
  if (topology === 'all') {
    const all = await startMeasured(ctx, 'all', `${label}-all`, env);
    return { api: all, processes: [all], stop: () => all.stop() };
  }
  const worker = await startMeasured(ctx, 'worker', `${label}-worker`, env);
  try {
    const api = await startMeasured(ctx, 'api', `${label}-api`, env);
    return { api, processes: [api, worker], stop: async () => void (await Promise.all([api.stop(), worker.stop()])) };
  } catch (err) {
    await worker.stop();
    throw err;
  }
}

/**
 * What else the phase cost: the share of the machine's CPU that was busy, each platform process's
 * event loop delay (prom-client's p99 since the previous scrape, which resets it: a scrape starts a
 * phase), and each worker's admission rounds per second, by whether they admitted anything.
 */
export async function phaseStart(platform: RunningPlatform, probeUrl: string) {
  const texts = await Promise.all(platform.processes.map((p) => fetch(`${p.url}/metrics`).then((r) => r.text())));
  const stop = new AbortController();
  return { cpu: machineCpu(), stop, probe: probeRoundTrips(probeUrl, probeEveryMs, stop.signal), rounds: texts.map(admissionRounds), at: epochMs() };
}

/** The admission rounds a process has counted, by outcome (none in the api role). */
function admissionRounds(metricsText: string): { admitted: number; empty: number } {
  const count = (outcome: string) => Number(new RegExp(`^webhook_admission_rounds_total\\{outcome="${outcome}"\\} (\\S+)$`, 'm').exec(metricsText)?.[1] ?? 0);
  return { admitted: count('admitted'), empty: count('empty') };
}

export async function phaseEnd(platform: RunningPlatform, started: Awaited<ReturnType<typeof phaseStart>>) {
  started.stop.abort();
  const rtts = await started.probe;
  const seconds = (epochMs() - started.at) / 1000;
  const loops: Record<string, unknown> = {};
  const rounds: Record<string, unknown> = {};
  for (const [i, p] of platform.processes.entries()) {
    const text = await fetch(`${p.url}/metrics`).then((r) => r.text());
    const lag = (name: string) => round(Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) * 1000, 1);
    loops[p.role] = {
      p50Ms: lag('nodejs_eventloop_lag_p50_seconds'),
      p99Ms: lag('nodejs_eventloop_lag_p99_seconds'),
      maxMs: lag('nodejs_eventloop_lag_max_seconds'),
    };
    if (p.role === 'api') continue;
    const before = started.rounds[i]!;
    const after = admissionRounds(text);
    rounds[p.role] = { admittedPerSecond: round((after.admitted - before.admitted) / seconds, 1), emptyPerSecond: round((after.empty - before.empty) / seconds, 1) };
  }
  return {
    machineCpuBusy: round(busyShare(started.cpu, machineCpu()), 3),
    bareRequestP50Ms: round(percentile(rtts, 50), 2),
    bareRequestP99Ms: round(percentile(rtts, 99), 2),
    eventLoopDelay: loops,
    admissionRounds: rounds,
  };
}

/**
 * Where B's time went, from the database: from the event's creation (events.created_at, taken by
 * the api before the publish batch commits, so the commit is included) to the start of its first
 * attempt (then the scheduler: wake-up, admission, a slot), as percentiles in ms, for the events
 * made in [since, until).
 */
export async function schedulerWait(ctx: BenchContext, tenantId: string, since: Date, until = new Date()) {
  const { rows } = await ctx.db.raw<{ rows: Array<{ p50: number; p99: number; max: number }> }>(
    `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY w) AS p50, percentile_cont(0.99) WITHIN GROUP (ORDER BY w) AS p99, max(w) AS max
       FROM (SELECT extract(epoch FROM a.started_at - e.created_at) * 1000 AS w
               FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a JOIN events e ON e.id = d.event_id
              WHERE d.tenant_id = ? AND a.attempt_number = 1 AND e.created_at >= ? AND e.created_at < ?) x`,
    [uuidOf('tenant', tenantId), since, until],
  );
  const r = rows[0];
  return { p50Ms: round(Number(r?.p50 ?? Number.NaN), 1), p99Ms: round(Number(r?.p99 ?? Number.NaN), 1), maxMs: round(Number(r?.max ?? Number.NaN), 1) };
}

/**
 * B's path in two parts, per delivered event: from its 202 to the start of its first attempt (the
 * scheduler: wake-up, admission, a slot), and from that start to its arrival at the receiver (the
 * worker's request and the receiver). The bench, the receiver and PostgreSQL share this machine's
 * clock; the attempt's start is the worker's, in whole milliseconds, so each part is off by up to
 * 1 ms. An attempt can start before its 202 has reached the client, so the first part can be
 * negative.
 */
export async function pathSplit(ctx: BenchContext, stream: StreamLatency) {
  const { rows } = await ctx.db.raw<{ rows: Array<{ event_id: string; started: number }> }>(
    `SELECT d.event_id, extract(epoch FROM min(a.started_at)) * 1000 AS started
       FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a
      WHERE d.event_id = ANY(?) AND a.attempt_number = 1
      GROUP BY d.event_id`,
    [stream.arrivals.map((a) => uuidOf('event', a.eventId))],
  );
  const startedAt = new Map(rows.map((r) => [idOfUuid('event', r.event_id), Number(r.started)]));
  const toStart: number[] = [];
  const toArrival: number[] = [];
  for (const a of stream.arrivals) {
    const started = startedAt.get(a.eventId);
    if (started === undefined) continue;
    toStart.push(started - a.ackAt);
    toArrival.push(a.arrivedAt - started);
  }
  const summary = (ms: number[]) => ({ p50Ms: round(percentile(ms, 50), 1), p99Ms: round(percentile(ms, 99), 1), maxMs: round(Math.max(...ms), 1) });
  // The p99 is one of the slowest 1 %: which part each of them spent its time in.
  const slowest = toStart
    .map((s, i) => ({ totalMs: round(s + toArrival[i]!, 1), ackToAttemptStartMs: round(s, 1), attemptStartToArrivalMs: round(toArrival[i]!, 1) }))
    .sort((a, b) => b.totalMs - a.totalMs)
    .slice(0, Math.max(1, Math.ceil(toStart.length / 100)));
  return { events: toStart.length, ackToAttemptStart: summary(toStart), attemptStartToArrival: summary(toArrival), slowest };
}

/**
 * B's p99 in the burst's first seconds and after them: a tail set at the burst's onset (a process
 * meeting a sudden load) reads apart from one that lasts.
 */
export function onsetSplit(stream: StreamLatency, burstStartedAt: number, onsetSeconds: number) {
  const until = burstStartedAt + onsetSeconds * 1000;
  const onset = stream.latencies.filter((_, i) => stream.ackedAt[i]! < until);
  const after = stream.latencies.filter((_, i) => stream.ackedAt[i]! >= until);
  const p99 = (ms: number[]) => (ms.length > 0 ? round(percentile(ms, 99), 1) : null);
  return { onsetSeconds, onset: { deliveries: onset.length, p99Ms: p99(onset) }, after: { deliveries: after.length, p99Ms: p99(after) } };
}

/** The probe's own port: a receiver port no endpoint uses. */
export const probeUrl = (ctx: BenchContext) => ctx.receiver.okUrl(noisyEndpoints + 1, 'probe');

interface BurstCase {
  ratio: number;
  bareRequestRatio: number;
  platformRatio: number;
  details: Record<string, unknown>;
}

/**
 * Noisy neighbour, burst. Tenant B (1 endpoint) publishes a steady stream alone and its 202 →
 * receiver p99 is measured (after a warm-up, on the fresh process). Then B publishes the same
 * stream again while tenant A (5 endpoints, each its own receiver port, every event to all 5)
 * publishes a burst as fast as the API takes it over a bounded number of connections; B is
 * measured over the same number of seconds, starting with the burst and with nothing left out.
 * The burst keeps going until B's measurement is over (B's drain wait included), then stops.
 * ratio = B's p99 with the burst / B's p99 alone.
 */
/** Tenant A (the noisy one, 5 endpoints), tenant B (1 endpoint) and B's steady stream: both cases'. */
export async function tenantsAndStream(ctx: BenchContext, api: Parameters<typeof createTenant>[0]) {
  const cfg = ctx.config.fairness;
  const noisy = await createTenant(api, ctx.settings.adminToken, {
    name: 'fair-a',
    endpointUrls: Array.from({ length: noisyEndpoints }, (_, i) => ctx.receiver.okUrl(i, `fair-a/${i}`)),
  });
  const quiet = await createTenant(api, ctx.settings.adminToken, { name: 'fair-b', endpointUrls: [ctx.receiver.okUrl(noisyEndpoints, 'fair-b')] });
  const stream: StreamSpec = {
    rate: cfg.rate,
    seconds: cfg.seconds,
    warmupSeconds: 0,
    drainSeconds: cfg.drainSeconds,
    eventType: () => 'order.created',
    deliveriesPerEvent: 1,
  };
  return { noisy, quiet, stream };
}

async function runBurstCase(ctx: BenchContext, topology: Topology, run: number): Promise<BurstCase> {
  const cfg = ctx.config.fairness;
  await resetState(ctx);
  // A's burst is bounded only by what the API accepts: the tenant limit's 429s cost far less than
  // accepted events and would lighten A's load.
  const platform = await startTopology(ctx, topology, 'fairness-burst', { TENANT_RATE_LIMIT_PER_SECOND: '1000000' });
  try {
    const { noisy, quiet, stream } = await tenantsAndStream(ctx, platform.api);
    const url = platform.api.url;

    ctx.log(`fairness (${topology}, run ${run} of ${cfg.runs}): tenant B alone, ${cfg.rate} events/s for ${cfg.warmupSeconds}+${cfg.seconds}s`);
    let phase = await phaseStart(platform, probeUrl(ctx));
    // The warm-up's events are left out, as the stream's own percentiles leave them out.
    const aloneSince = new Date(Date.now() + cfg.warmupSeconds * 1000);
    const alone = await measureStream(ctx, url, quiet.apiKey, { ...stream, seconds: cfg.warmupSeconds + cfg.seconds, warmupSeconds: cfg.warmupSeconds });
    const aloneMachine = await phaseEnd(platform, phase);
    const aloneUntil = new Date();

    // Built before the clock starts, so making the bodies does not compete with B's stream.
    const burstRequests = Array.from({ length: cfg.burst }, (_, i) => publishRequest(noisy.apiKey, i, 'order.created', ctx.config.payloadBytes));
    ctx.log(`fairness (${topology}): tenant B again while tenant A publishes a burst of ${cfg.burst} events (${cfg.burstConnections} connections)`);
    const stopBurst = new AbortController();
    const burstStartedAt = epochMs();
    const burst = sendList(url, burstRequests, cfg.burstConnections, stopBurst.signal);
    burst.catch(() => undefined); // awaited below; a failure must not surface as an unhandled rejection first
    let withBurst;
    phase = await phaseStart(platform, probeUrl(ctx));
    const burstSince = new Date();
    const burstSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
    burstSampler?.start();
    let burstMachine;
    let burstActivity;
    try {
      withBurst = await measureStream(ctx, url, quiet.apiKey, stream);
      burstMachine = await phaseEnd(platform, phase);
    } finally {
      stopBurst.abort();
      burstActivity = burstSampler?.stop(20);
    }
    const burstResult = await burst;
    const burstAnswered = Object.values(burstResult.statusCodes).reduce((a, b) => a + b, 0);
    if (burstAnswered >= cfg.burst) throw new Error(`fairness: A's burst of ${cfg.burst} events ended before B's phase did (${topology}, answered ${JSON.stringify(burstResult.statusCodes)}); raise BENCH_FAIRNESS_BURST`);
    const noisyDelivered = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE tenant_id = ? AND status = 'succeeded'", [uuidOf('tenant', noisy.id)]);

    const aloneWait = await schedulerWait(ctx, quiet.id, aloneSince, aloneUntil);
    const burstWait = await schedulerWait(ctx, quiet.id, burstSince);
    const aloneSummary = streamSummary(alone);
    const burstSummary = streamSummary(withBurst);
    for (const [phase, s] of [['alone', aloneSummary], ['with burst', burstSummary]] as const) {
      if (s.publishFailed > 0) throw new Error(`fairness: ${s.publishFailed} of tenant B's publishes failed (${phase}, ${topology})`);
    }
    ctx.log(`fairness (${topology}): B p99 alone ${aloneSummary.p99Ms} ms, with A's burst ${burstSummary.p99Ms} ms`);
    const ratio = streamP99(withBurst) / Math.max(streamP99(alone), p99FloorMs);
    const bareRatio = burstMachine.bareRequestP99Ms / Math.max(aloneMachine.bareRequestP99Ms, p99FloorMs);
    return {
      ratio: round(ratio, 3),
      bareRequestRatio: round(bareRatio, 3),
      platformRatio: round(ratio / bareRatio, 3),
      details: {
        rate: cfg.rate,
        seconds: cfg.seconds,
        alone: { ...aloneSummary, schedulerWait: aloneWait, path: await pathSplit(ctx, alone), machine: aloneMachine },
        withBurst: {
          ...burstSummary,
          byTime: onsetSplit(withBurst, burstStartedAt, cfg.onsetSeconds),
          overTime: latencyOverTime(withBurst, 1000, burstStartedAt),
          schedulerWait: burstWait,
          path: await pathSplit(ctx, withBurst),
          machine: burstMachine,
          pgActivity: burstActivity,
        },
        burst: {
          events: cfg.burst,
          endpointsPerEvent: noisyEndpoints,
          connections: cfg.burstConnections,
          answered: burstResult.statusCodes,
          acceptedPerSecond: round((burstResult.statusCodes['202'] ?? 0) / burstResult.seconds),
          seconds: round(burstResult.seconds, 2),
          deliveriesSucceededWhenStopped: noisyDelivered,
        },
      },
    };
  } finally {
    await platform.stop();
  }
}

/**
 * A case `runs` times, each on fresh processes and a reset database: B's p99 alone moved by a third
 * from one start to the next (docs/performance.md, "The backlog case over 45 s, three times"). The
 * published run is the one whose `by` is the median (the lower of the middle two for an even
 * count), so that a case's numbers stay one run's: the burst case's platformRatio is still its
 * ratio / bareRequestRatio. Every run is in the details, in order.
 */
async function medianRun<T extends { details: Record<string, unknown> }>(runs: number, run: (n: number) => Promise<T>, by: NoInfer<keyof T & string>): Promise<T> {
  const all: T[] = [];
  for (let n = 1; n <= runs; n++) all.push(await run(n));
  const value = (c: T) => Number(c[by]);
  const median = [...all].sort((a, b) => value(a) - value(b))[Math.floor((all.length - 1) / 2)]!;
  const values = all.map(value);
  return { ...median, details: { medianOf: by, values, worst: Math.max(...values), medianRun: all.indexOf(median) + 1, runs: all.map(({ details, ...numbers }) => ({ ...numbers, ...details })) } };
}

/**
 * Noisy neighbour, two ways (burst of intake, backlog draining), each on the platform as deployed
 * (api and worker apart) and as `npm start` runs it (`all`), each case `runs` times (medianRun). The
 * published numbers come from the first topology measured (`separate` by default); every run of
 * every case of every topology is in the details.
 */
export async function runFairness(ctx: BenchContext): Promise<FairnessResult> {
  const cfg = ctx.config.fairness;
  const byTopology: Partial<Record<Topology, { burst?: BurstCase; backlog?: BacklogCase }>> = {};
  for (const topology of cfg.topologies) {
    const cases: { burst?: BurstCase; backlog?: BacklogCase } = {};
    for (const c of cfg.cases satisfies FairnessCase[]) {
      if (c === 'burst') cases.burst = await medianRun<BurstCase>(cfg.runs, (n) => runBurstCase(ctx, topology, n), 'platformRatio');
      else cases.backlog = await medianRun<BacklogCase>(cfg.runs, (n) => runBacklogCase(ctx, topology, n), 'ratio');
    }
    byTopology[topology] = cases;
  }
  const headline = cfg.topologies[0]!;
  const main = byTopology[headline]!;
  return {
    ratio: main.burst?.ratio ?? Number.NaN,
    bareRequestRatio: main.burst?.bareRequestRatio ?? Number.NaN,
    platformRatio: main.burst?.platformRatio ?? Number.NaN,
    backlogRatio: main.backlog?.ratio ?? Number.NaN,
    headline,
    details: { headline, p99FloorMs, ...byTopology },
  };
}
