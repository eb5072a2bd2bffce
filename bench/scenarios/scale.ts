import { performance } from 'node:perf_hooks';
import { admitDue } from '../../src/delivery/sql/admit.js';
import { resetState, type BenchContext } from '../lib/context.js';
import { clearWork, insertBacklog, insertEndpoints, insertTenant } from '../lib/database.js';
import { percentile, round } from '../lib/stats.js';
import { latencyRun, streamSummary } from './latency.js';
import { join } from 'node:path';
import { repoRoot } from '../lib/children.js';
import { StallSampler, stallReport, type StallTimeline } from '../lib/stall-sampler.js';

export interface ScaleResult {
  endpoints: number;
  admissionMsP50: number;
  admissionMsIdle0P50: number;
  latencyP99Ms: number;
  details: Record<string, unknown>;
}

const busyEndpoints = 10;
const busyBacklog = 50;
const limits = { queuedLeaseSeconds: 30, circuitFailureThreshold: 5, perEndpointBatch: 500 };

/**
 * Scale: what 100,000 endpoints with nothing to send cost. First the wall time of one admission
 * round (admitDue, called directly, no platform process running) with 10 busy endpoints of 50
 * pending deliveries each and no other endpoint; then the same after adding the idle endpoints
 * (active, no deliveries) to the same tenant. Then, with the idle endpoints still there, the
 * latency of 100 events/s through a fresh `all` process to one endpoint of another tenant (the
 * idle endpoints never match its events). That latency run uses BENCH_LATENCY_WARMUP_SECONDS and
 * _DRAIN_SECONDS.
 */
export async function runScale(ctx: BenchContext): Promise<ScaleResult> {
  const cfg = ctx.config.scale;
  await resetState(ctx);
  const tenantId = await insertTenant(ctx.db, 'scale-admission');
  // maxConcurrency = backlog, so every round admits every busy endpoint's whole backlog.
  const busy = await insertEndpoints(ctx.db, tenantId, 'busy', busyEndpoints, busyBacklog, ctx.settings.secretsKey);
  await insertBacklog(ctx.db, tenantId, busy.map((endpointId) => ({ endpointId, count: busyBacklog })), ctx.config.payloadBytes);

  ctx.log(`scale: admission rounds with ${busyEndpoints} busy endpoints and no idle ones`);
  const idle0 = await admissionRounds(ctx);
  // In the busy endpoints' tenant, as the issue has it. One tenant owning nearly every endpoint is
  // then part of what is measured: PostgreSQL's statistics see few distinct tenant_ids, so a
  // generic plan for "the endpoints of tenant $1" expects most of the table, for every tenant.
  ctx.log(`scale: inserting ${cfg.endpoints} idle endpoints`);
  await insertEndpoints(ctx.db, tenantId, 'idle', cfg.endpoints, 10, ctx.settings.secretsKey);
  ctx.log(`scale: admission rounds with ${cfg.endpoints} idle endpoints`);
  const idleN = await admissionRounds(ctx);

  // The backlog was only there to be admitted; the endpoints stay for the latency run.
  await clearWork(ctx.db);
  // Whether a slow publish was the disk's or ours: what PostgreSQL and the disk did every 10 ms
  // of the run, beside an fdatasync probe on the same disk (bench/lib/stall-sampler.ts).
  await ctx.db.raw(`ALTER DATABASE ${new URL(ctx.settings.databaseUrl).pathname.slice(1)} SET track_wal_io_timing = on`);
  const stallSampler = new StallSampler(ctx.settings.databaseUrl, join(repoRoot, 'bench', 'results', 'disk-probe.tmp'));
  await stallSampler.start();
  let timeline: StallTimeline;
  const r = await latencyRun(ctx, {
    label: 'scale',
    rate: cfg.latencyRate,
    seconds: cfg.latencySeconds,
    warmupSeconds: ctx.config.latency.warmupSeconds,
    drainSeconds: ctx.config.latency.drainSeconds,
    endpoints: 1,
    fanOut: 'every',
    keepTables: true,
  }).finally(async () => {
    timeline = await stallSampler.stop();
  });
  const publishes = r.sent.latenciesMs.map((ms, i) => ({ at: r.sent.startedAt + (i * 1000) / cfg.latencyRate, ms }));
  const stalls = stallReport(timeline!, publishes);
  ctx.log(`scale: publish p99 ${percentile(r.sent.latenciesMs, 99)} ms; disk probe fsync p99 ${stalls.diskProbe.p99Ms} ms, max ${stalls.diskProbe.maxMs} ms`);
  if (r.sent.failed > 0) throw new Error(`scale: ${r.sent.failed} of ${r.sent.sent} publishes failed: ${JSON.stringify(r.sent.statusCodes)}`);
  const latency = streamSummary(r);
  return {
    endpoints: cfg.endpoints,
    admissionMsP50: idleN.p50Ms,
    admissionMsIdle0P50: idle0.p50Ms,
    latencyP99Ms: latency.p99Ms,
    details: {
      busyEndpoints,
      pendingPerBusyEndpoint: busyBacklog,
      limits,
      admissionIdle0: idle0,
      admissionIdleN: idleN,
      admissionRatio: round(idleN.p50Ms / idle0.p50Ms, 3),
      latency: { rate: cfg.latencyRate, seconds: cfg.latencySeconds, ...latency },
      // The goal: our p99 within 1.5 × the disk's worst fdatasync over the same run.
      p99OverDiskWorst: round(latency.p99Ms / Math.max(stalls.diskProbe.maxMs, 0.01), 2),
      stalls,
    },
  };
}

/**
 * Times admission rounds on the bench's own connection. What a round admits is put back to
 * pending after it, so every round admits the same work; the first rounds are left out (plans and
 * caches warming up).
 */
async function admissionRounds(ctx: BenchContext) {
  const { admissionRounds: rounds, admissionWarmupRounds: warmup } = ctx.config.scale;
  const expected = busyEndpoints * busyBacklog;
  // Both series start from the same table state: the previous series' put-backs left dead row
  // versions behind, and the new endpoints need statistics, as autovacuum would have given them.
  await ctx.db.raw('VACUUM ANALYZE deliveries, endpoints');
  const times: number[] = [];
  for (let i = 0; i < warmup + rounds; i++) {
    const started = performance.now();
    await admitDue(ctx.db, limits);
    const ms = performance.now() - started;
    // Counted here rather than from admitDue's answer, whose shape is not the point of this bench.
    const putBack = await ctx.db.raw<{ rowCount: number }>("UPDATE deliveries SET status = 'pending', lease_until = NULL WHERE status = 'queued'");
    if (putBack.rowCount !== expected) throw new Error(`scale: an admission round admitted ${putBack.rowCount} deliveries, expected ${expected}`);
    if (i >= warmup) times.push(ms);
  }
  return {
    rounds,
    warmupRounds: warmup,
    admittedPerRound: expected,
    p50Ms: round(percentile(times, 50), 2),
    p90Ms: round(percentile(times, 90), 2),
    minMs: round(Math.min(...times), 2),
    maxMs: round(Math.max(...times), 2),
  };
}
