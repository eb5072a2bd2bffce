import { epochMs } from '../lib/clock.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTenant, type BenchTenant } from '../lib/api.js';
import { clearRedisPrefix, resetState, startMeasured, waitUntil, withSetupApi, type BenchContext } from '../lib/context.js';
import { clearWork, countRows, insertBacklog } from '../lib/database.js';
import { round } from '../lib/stats.js';

export interface IsolationResult {
  ratio: number;
  details: Record<string, unknown>;
}

const healthyCount = 9;

interface PhaseResult {
  ratePerSecond: number;
  windowSeconds: number;
  delivered: number;
  /** Requests that reached the tenth endpoint during the whole phase. */
  tenthRequests: number;
  drainedEarly: boolean;
  /** Attempts recorded as attempt_timeout by the end of the phase. */
  timedOutAttempts: number;
}

/**
 * Isolation: 9 healthy endpoints and a tenth with a large backlog. Phase A: the tenth answers like
 * the others. Phase B: the tenth never answers (attempts end at ATTEMPT_TIMEOUT_MS). In every phase
 * the rate delivered to the 9 healthy endpoints is measured over the same window after the same
 * warm-up, with the same backlogs and a fresh worker. Phases run A, B, A and ratio = B / mean(A):
 * on a shared machine the throughput drifts over a minute, and bracketing B cancels a linear drift.
 */
export async function runIsolation(ctx: BenchContext): Promise<IsolationResult> {
  const cfg = ctx.config.isolation;
  await resetState(ctx);
  const healthyUrls = Array.from({ length: healthyCount }, (_, i) => ctx.receiver.okUrl(i, `iso/${i}`));
  const [allHealthy, oneHanging] = await withSetupApi(ctx, async (api) => [
    await createTenant(api, ctx.settings.adminToken, { name: 'iso-healthy', endpointUrls: [...healthyUrls, ctx.receiver.okUrl(healthyCount, 'iso/tenth')], maxConcurrency: 10 }),
    await createTenant(api, ctx.settings.adminToken, { name: 'iso-hanging', endpointUrls: [...healthyUrls, ctx.receiver.hangUrl(0, 'iso/tenth')], maxConcurrency: 10 }),
  ]);
  const a1 = await phase(ctx, allHealthy, 'all 10 healthy');
  const b = await phase(ctx, oneHanging, 'tenth hangs');
  const a2 = await phase(ctx, allHealthy, 'all 10 healthy again');
  const baseline = (a1.ratePerSecond + a2.ratePerSecond) / 2;
  return {
    ratio: round(b.ratePerSecond / baseline, 3),
    details: {
      attemptTimeoutMs: cfg.attemptTimeoutMs,
      healthyBacklogPerEndpoint: cfg.healthyPerEndpoint,
      tenthBacklog: cfg.hangingBacklog,
      allHealthy: a1,
      tenthHangs: b,
      allHealthyAgain: a2,
    },
  };
}

async function phase(ctx: BenchContext, tenant: BenchTenant, label: string): Promise<PhaseResult> {
  const cfg = ctx.config.isolation;
  await clearWork(ctx.db);
  await clearRedisPrefix(ctx.redis, ctx.settings.queuePrefix);
  const shares = tenant.endpointIds.map((endpointId, i) => ({ endpointId, count: i < healthyCount ? cfg.healthyPerEndpoint : cfg.hangingBacklog }));
  ctx.log(`isolation (${label}): inserting ${healthyCount}×${cfg.healthyPerEndpoint} + ${cfg.hangingBacklog} deliveries`);
  await insertBacklog(ctx.db, tenant.id, shares, ctx.config.payloadBytes);
  await ctx.receiver.reset();
  const healthyTotal = healthyCount * cfg.healthyPerEndpoint;
  const worker = await startMeasured(ctx, 'worker', `isolation-worker-${label.replace(/\W+/g, '-')}`, { ATTEMPT_TIMEOUT_MS: String(cfg.attemptTimeoutMs) });
  let result: Omit<PhaseResult, 'timedOutAttempts'>;
  try {
    const firstAt = await waitUntil(async () => (await ctx.receiver.counts()).firstAt ?? undefined, 'the first delivery', 60_000, 50);
    await sleep(Math.max(0, firstAt + cfg.warmupSeconds * 1000 - epochMs()));
    const startedAt = Date.now();
    const start = await ctx.receiver.okTotal(healthyCount);
    let end = start;
    let endedAt = startedAt;
    ctx.log(`isolation (${label}): measuring for ${cfg.windowSeconds}s`);
    while (endedAt - startedAt < cfg.windowSeconds * 1000 && end < healthyTotal) {
      await sleep(250);
      end = await ctx.receiver.okTotal(healthyCount);
      endedAt = Date.now();
    }
    const { counts } = await ctx.receiver.counts();
    const tenthRequests = (counts[healthyCount] ?? 0) + (counts[ctx.receiver.okPorts.length] ?? 0);
    const windowSeconds = (endedAt - startedAt) / 1000;
    result = {
      ratePerSecond: round((end - start) / windowSeconds),
      windowSeconds: round(windowSeconds, 2),
      delivered: end - start,
      tenthRequests,
      drainedEarly: end >= healthyTotal,
    };
  } finally {
    // Hung attempts end at their timeout during graceful shutdown; do not wait for that.
    await worker.stop(3_000);
  }
  const timedOutAttempts = await countRows(ctx.db, "SELECT count(*) AS n FROM attempts WHERE error_class = 'attempt_timeout'");
  ctx.log(`isolation (${label}): ${result.ratePerSecond}/s to the 9 healthy endpoints; ${timedOutAttempts} attempts timed out`);
  return { ...result, timedOutAttempts };
}
