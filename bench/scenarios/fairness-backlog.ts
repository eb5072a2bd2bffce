import { uuidOf } from '../../src/domain/ids.js';
import type { Topology } from '../lib/config.js';
import { resetState, waitUntil, type BenchContext } from '../lib/context.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { countRows, insertBacklog } from '../lib/database.js';
import { PgSampler } from '../lib/pg-sampler.js';
import { round } from '../lib/stats.js';
import { noisyEndpoints, p99FloorMs, pathSplit, phaseEnd, phaseStart, probeUrl, schedulerWait, startTopology, tenantsAndStream } from './fairness.js';
import { latencyOverTime, measureStream, streamP99, streamSummary } from './latency.js';

export interface BacklogCase {
  /** B's p99 while A's backlog drains / B's p99 alone, on the same platform. */
  ratio: number;
  details: Record<string, unknown>;
}

/**
 * Noisy neighbour, backlog. Tenant B (1 endpoint) publishes 20 events/s alone and its 202 →
 * receiver p99 is measured. Then tenant A's backlog is created: `backlogEvents` events, each to
 * all 5 of A's endpoints (100,000 deliveries by default), written in SQL in batches as fan-out
 * leaves them (bench/lib/database.ts insertBacklog), in one transaction, so the running platform
 * finds all of it at once. Once A's drain has begun, and `backlogSettleMs` after (BENCH_FAIRNESS_BACKLOG_SETTLE_MS),
 * B publishes the same stream again. Both of B's phases last
 * `backlogSeconds` (after the warm-up), shorter than the drain. B's measurement only needs A to
 * be still draining: that is checked when it ends, and the case fails if A had finished (a
 * smaller backlog than the machine needed). The platform is
 * stopped then, with A's backlog not drained: the case takes seconds, not the whole drain.
 * ratio = B's p99 during the drain / B's p99 alone.
 */
export async function runBacklogCase(ctx: BenchContext, topology: Topology, run: number): Promise<BacklogCase> {
  const cfg = ctx.config.fairness;
  await resetState(ctx);
  const platform = await startTopology(ctx, topology, 'fairness-backlog');
  try {
    const { noisy, quiet, stream } = await tenantsAndStream(ctx, platform.api);
    const url = platform.api.url;

    ctx.log(`fairness backlog (${topology}, run ${run} of ${cfg.runs}): tenant B alone, ${cfg.rate} events/s for ${cfg.warmupSeconds}+${cfg.backlogSeconds}s`);
    let phase = await phaseStart(platform, probeUrl(ctx));
    const aloneSince = new Date(Date.now() + cfg.warmupSeconds * 1000);
    const alone = await measureStream(ctx, url, quiet.apiKey, { ...stream, seconds: cfg.warmupSeconds + cfg.backlogSeconds, warmupSeconds: cfg.warmupSeconds });
    const aloneMachine = await phaseEnd(platform, phase);
    const aloneWait = await schedulerWait(ctx, quiet.id, aloneSince);

    ctx.log(`fairness backlog (${topology}): tenant A's backlog, ${cfg.backlogEvents} events × ${noisyEndpoints} endpoints`);
    const insertStarted = Date.now();
    const backlog = await insertBacklog(
      ctx.db,
      noisy.id,
      noisy.endpointIds.map((endpointId) => ({ endpointId, count: cfg.backlogEvents })),
      ctx.config.payloadBytes,
      { oneTransaction: true },
    );
    const insertSeconds = (Date.now() - insertStarted) / 1000;
    // With BENCH_PG_SAMPLE=1, what PostgreSQL's backends did after the insert and during B's window.
    const settleSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
    settleSampler?.start();
    const undone = () => countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE tenant_id = ? AND status <> 'succeeded'", [uuidOf('tenant', noisy.id)]);
    // B starts once A's drain is under way and the one large insert's aftermath has passed (the
    // first reads and vacuums of 100,000 rows committed at once: hint bits, statistics), which a
    // backlog published over time or held by a pause does not have.
    await waitUntil(async () => (await undone()) < backlog, "A's drain to begin", 30_000, 250);
    await sleep(cfg.backlogSettleMs);
    const leftAtStart = await undone();

    const settleActivity = settleSampler?.stop();

    ctx.log(`fairness backlog (${topology}): tenant B again while A's backlog drains (${leftAtStart} of ${backlog} left)`);
    const drainSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
    drainSampler?.start();
    phase = await phaseStart(platform, probeUrl(ctx));
    const drainSince = new Date(Date.now() + cfg.warmupSeconds * 1000);
    const windowStarted = Date.now();
    // The same warm-up as alone: B's new connections and first requests count in neither phase.
    const during = await measureStream(ctx, url, quiet.apiKey, { ...stream, seconds: cfg.warmupSeconds + cfg.backlogSeconds, warmupSeconds: cfg.warmupSeconds });
    const windowSeconds = (Date.now() - windowStarted) / 1000;
    const drainActivity = drainSampler?.stop();
    const leftAtEnd = await undone();
    const drainMachine = await phaseEnd(platform, phase);
    const drainWait = await schedulerWait(ctx, quiet.id, drainSince);
    if (leftAtEnd === 0) {
      throw new Error(`fairness backlog (${topology}): A's backlog was drained before B's window ended; raise BENCH_FAIRNESS_BACKLOG_EVENTS`);
    }

    const aloneSummary = streamSummary(alone);
    const drainSummary = streamSummary(during);
    for (const [name, s] of [['alone', aloneSummary], ['during the drain', drainSummary]] as const) {
      if (s.publishFailed > 0) throw new Error(`fairness backlog: ${s.publishFailed} of tenant B's publishes failed (${name}, ${topology})`);
    }
    ctx.log(`fairness backlog (${topology}): B p99 alone ${aloneSummary.p99Ms} ms, during A's drain ${drainSummary.p99Ms} ms; A left ${leftAtEnd}`);
    return {
      ratio: round(streamP99(during) / Math.max(streamP99(alone), p99FloorMs), 3),
      details: {
        rate: cfg.rate,
        seconds: cfg.backlogSeconds,
        warmupSeconds: cfg.warmupSeconds,
        alone: { ...aloneSummary, schedulerWait: aloneWait, path: await pathSplit(ctx, alone), machine: aloneMachine },
        duringDrain: { ...drainSummary, schedulerWait: drainWait, path: await pathSplit(ctx, during), machine: drainMachine, overTime: latencyOverTime(during, 1000), pgActivity: drainActivity },
        backlog: {
          deliveries: backlog,
          events: cfg.backlogEvents,
          endpoints: noisyEndpoints,
          insertSeconds: round(insertSeconds, 1),
          settleMs: cfg.backlogSettleMs,
          pgActivityBeforeB: settleActivity,
          leftWhenBStarted: leftAtStart,
          leftWhenBEnded: leftAtEnd,
          // A's rate while B was measured: the drain was not bought by starving A.
          drainedPerSecondDuringB: round((leftAtStart - leftAtEnd) / windowSeconds),
        },
      },
    };
  } finally {
    await platform.stop();
  }
}
