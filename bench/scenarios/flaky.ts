import { epochMs } from '../lib/clock.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { countRows } from '../lib/database.js';
import type { PacedResult } from '../lib/load.js';
import type { Arrival } from '../lib/receiver.js';
import { percentile, round } from '../lib/stats.js';
import { publishPaced } from './latency.js';

export interface FlakyResult {
  lagSeconds: number;
  details: Record<string, unknown>;
}

const unfinishedSql = "SELECT count(*) AS n FROM deliveries WHERE status NOT IN ('succeeded', 'dead')";

/**
 * A flaky endpoint: one `all` process, one endpoint on a receiver port that answers 500 to every
 * tenth request, events published at a steady rate (open loop) for minutes. The question is whether
 * the endpoint keeps up or falls behind, so lag is how late an attempt is against the moment it
 * was due:
 *  - a first attempt was due when its event's 202 arrived at the client: lag = arrival - 202;
 *  - a retry was due at the time its previous attempt scheduled (attempts.next_attempt_at): lag =
 *    its start - that time. The backoff itself (RETRY_BASE_DELAY_MS, 5 s by default) is the retry
 *    policy working, not the platform falling behind.
 * lagSeconds is the largest of these in the last window of the stream, and, as lower bounds, the
 * time waited by events never attempted by the end of the stream, so an event stuck behind the
 * failures cannot make the number smaller by not arriving. Arrival - 202 of every request,
 * retries included, is in the details (`window.lagMaxSeconds`).
 */
export async function runFlaky(ctx: BenchContext): Promise<FlakyResult> {
  const cfg = ctx.config.flaky;
  await resetState(ctx);
  const platform = await startMeasured(ctx, 'all', 'flaky-all');
  const arrivals: Arrival[] = [];
  let acked: Map<string, number>;
  let sent: PacedResult;
  let streamStart: number;
  let streamEnd: number;
  let unfinishedAtEnd: number;
  let unfinishedAfterSettle: number;
  let retryLateMs: number;
  try {
    const tenant = await createTenant(platform, ctx.settings.adminToken, { name: 'flaky', endpointUrls: [ctx.receiver.flakyUrl(0, 'flaky')] });
    await ctx.receiver.reset();
    await ctx.receiver.record(true);
    const stopCollecting = ctx.receiver.collectArrivals(arrivals);
    try {
      ctx.log(`flaky: ${cfg.rate} events/s for ${cfg.seconds}s to an endpoint that fails every tenth request`);
      streamStart = epochMs();
      ({ acked, sent } = await publishPaced(ctx, platform.url, tenant.apiKey, { ...cfg, warmupSeconds: 0, eventType: () => 'order.created' }));
      streamEnd = epochMs();
      unfinishedAtEnd = await countRows(ctx.db, unfinishedSql);
      retryLateMs = await retryLateness(ctx, streamEnd - cfg.windowSeconds * 1000, streamEnd);
      ctx.log(`flaky: stream done, ${unfinishedAtEnd} deliveries unfinished; counting again in ${cfg.settleSeconds}s`);
      await sleep(cfg.settleSeconds * 1000);
      unfinishedAfterSettle = await countRows(ctx.db, unfinishedSql);
    } finally {
      await stopCollecting();
      await ctx.receiver.record(false);
    }
  } finally {
    await platform.stop();
  }
  if (sent.failed > 0) throw new Error(`flaky: ${sent.failed} of ${sent.sent} publishes failed: ${JSON.stringify(sent.statusCodes)}`);

  const lag = lagAnalysis(arrivals, acked, streamStart, streamEnd, cfg.windowSeconds * 1000);
  return {
    lagSeconds: round(Math.max(lag.lagMs, retryLateMs) / 1000, 3),
    details: {
      rate: cfg.rate,
      seconds: cfg.seconds,
      windowSeconds: cfg.windowSeconds,
      achievedRate: round(sent.achievedRate),
      answeredRate: round(sent.answeredRate),
      publishP99Ms: round(percentile(sent.latenciesMs, 99), 2),
      events: acked.size,
      ...lag.details,
      retryLateMaxSecondsInWindow: round(retryLateMs / 1000, 3),
      unfinishedDeliveries: { atStreamEnd: unfinishedAtEnd, afterSettle: unfinishedAfterSettle, settleSeconds: cfg.settleSeconds },
    },
  };
}

/** The latest a retry started after its scheduled time, among retries started in [from, to]. */
async function retryLateness(ctx: BenchContext, from: number, to: number): Promise<number> {
  const { rows } = await ctx.db.raw<{ rows: Array<{ ms: number | null }> }>(
    `SELECT EXTRACT(epoch FROM max(a.started_at - p.next_attempt_at)) * 1000 AS ms
       FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a
       JOIN LATERAL delivery_attempts(d.id) p ON p.attempt_number = a.attempt_number - 1
      WHERE a.attempt_number > 1 AND p.next_attempt_at IS NOT NULL
        AND a.started_at BETWEEN to_timestamp(?::float8 / 1000) AND to_timestamp(?::float8 / 1000)`,
    [from, to],
  );
  return Math.max(0, Number(rows[0]?.ms ?? 0));
}

/**
 * The lag of every request that arrived, the largest in the window that ends with the stream, and
 * the lower bounds of events still without a 200 when the stream ended. Arrivals are in arrival
 * order (one port), so an event's first arrival is its first attempt.
 */
function lagAnalysis(arrivals: Arrival[], acked: Map<string, number>, streamStart: number, streamEnd: number, windowMs: number) {
  const windowStart = streamEnd - windowMs;
  const succeededAt = new Map<string, number>();
  const attempted = new Set<string>();
  const firstArrival = new Map<string, number>();
  const perMinute: Array<{ minute: number; attempts: number; answered500: number; lagMaxSeconds: number }> = [];
  let windowLagMs = Number.NEGATIVE_INFINITY;
  let windowFirstAttemptLagMs = Number.NEGATIVE_INFINITY;
  let windowAttempts = 0;
  let unmatched = 0;
  const lags: number[] = [];
  for (const [id, at, status] of arrivals) {
    const ackAt = acked.get(id);
    if (ackAt === undefined) {
      unmatched++;
      continue;
    }
    const lag = at - ackAt;
    lags.push(lag);
    const firstAttempt = !attempted.has(id);
    attempted.add(id);
    if (firstAttempt) firstArrival.set(id, at);
    if (status === 200 && !succeededAt.has(id)) succeededAt.set(id, at);
    const minute = Math.floor((at - streamStart) / 60_000);
    const bucket = (perMinute[minute] ??= { minute, attempts: 0, answered500: 0, lagMaxSeconds: Number.NEGATIVE_INFINITY });
    bucket.attempts++;
    if (status === 500) bucket.answered500++;
    bucket.lagMaxSeconds = Math.max(bucket.lagMaxSeconds, lag / 1000);
    if (at < windowStart || at > streamEnd) continue;
    windowAttempts++;
    windowLagMs = Math.max(windowLagMs, lag);
    if (firstAttempt) windowFirstAttemptLagMs = Math.max(windowFirstAttemptLagMs, lag);
  }
  // Never attempted when the stream ended: lag at least the time waited by then.
  let waitingAtEnd = 0;
  let waitedMaxMs = 0;
  let neverAttempted = 0;
  let neverAttemptedWaitMs = 0;
  for (const [id, ackAt] of acked) {
    const firstAt = firstArrival.get(id);
    if (firstAt === undefined || firstAt > streamEnd) {
      neverAttempted++;
      neverAttemptedWaitMs = Math.max(neverAttemptedWaitMs, streamEnd - ackAt);
    }
    if ((succeededAt.get(id) ?? Number.POSITIVE_INFINITY) <= streamEnd) continue;
    waitingAtEnd++;
    waitedMaxMs = Math.max(waitedMaxMs, streamEnd - ackAt);
  }
  return {
    lagMs: Math.max(windowFirstAttemptLagMs, neverAttemptedWaitMs),
    details: {
      attempts: lags.length,
      answered500: perMinute.reduce((sum, b) => sum + (b?.answered500 ?? 0), 0),
      unmatchedArrivals: unmatched,
      lagP50Ms: round(percentile(lags, 50), 1),
      lagP99Ms: round(percentile(lags, 99), 1),
      window: {
        attempts: windowAttempts,
        lagMaxSeconds: round(windowLagMs / 1000, 3),
        firstAttemptLagMaxSeconds: round(windowFirstAttemptLagMs / 1000, 3),
        notAttemptedAtStreamEnd: neverAttempted,
        notAnswered200AtStreamEnd: waitingAtEnd,
        longestWaitAtStreamEndSeconds: round(waitedMaxMs / 1000, 3),
      },
      perMinute: perMinute.filter(Boolean).map((b) => ({ ...b, lagMaxSeconds: round(b.lagMaxSeconds, 3) })),
    },
  };
}
