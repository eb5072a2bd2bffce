import { epochMs } from '../lib/clock.js';
import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { rssBytes } from '../lib/proc.js';
import type { Arrival } from '../lib/receiver.js';
import { percentile, round } from '../lib/stats.js';
import { publishPaced } from './latency.js';

export interface DriftResult {
  /** p99 of first attempts in the stream's last minute over its second minute (goal ≤ 2). */
  lastOverSecondP99: number;
  details: Record<string, unknown>;
}

interface Minute {
  minute: number;
  firstAttempts: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Sampled at the minute's end: what might grow. */
  state?: Record<string, number>;
}

/**
 * What a long stream does to latency (issue 26, part 5): one `all` process, `rate` events/s for
 * `seconds` to 3 endpoints (two healthy, one answering 500 to every tenth request), and per
 * minute the p50 and p99 from each event's 202 to each of its first attempts' arrival (an event's
 * first three arrivals; the flaky endpoint's retries come seconds later, after its backoff).
 * Beside each minute, what could grow under it: table and index sizes, dead rows, autovacuum
 * runs, WAL written, the process's RSS.
 */
export async function runDrift(ctx: BenchContext): Promise<DriftResult> {
  const cfg = ctx.config.drift;
  await resetState(ctx);
  const platform = await startMeasured(ctx, 'all', 'drift-all');
  const arrivals: Arrival[] = [];
  /** By minute of the stream: 0 at its start, n at the end of minute n. */
  const states: Array<Record<string, number>> = [];
  let streamStart = 0;
  let acked: Map<string, number>;
  try {
    const tenant = await createTenant(platform, ctx.settings.adminToken, {
      name: 'drift',
      endpointUrls: [ctx.receiver.okUrl(0, 'drift/a'), ctx.receiver.okUrl(1, 'drift/b'), ctx.receiver.flakyUrl(0, 'drift/flaky')],
    });
    await ctx.receiver.reset();
    await ctx.receiver.record(true);
    const stopCollecting = ctx.receiver.collectArrivals(arrivals);
    const sampler = setInterval(() => {
      const minute = Math.round((Date.now() - streamStart) / 60_000);
      void sampleState(ctx, platform.pid).then((s) => (states[minute] = s), () => undefined);
    }, 60_000);
    try {
      ctx.log(`drift: ${cfg.rate} events/s for ${cfg.seconds}s to 3 endpoints, one failing every tenth request`);
      streamStart = epochMs();
      states[0] = await sampleState(ctx, platform.pid);
      ({ acked } = await publishPaced(ctx, platform.url, tenant.apiKey, { rate: cfg.rate, seconds: cfg.seconds, warmupSeconds: 0, eventType: () => 'order.created' }));
      // The last events' first attempts.
      await new Promise((r) => setTimeout(r, 5_000));
    } finally {
      clearInterval(sampler);
      await stopCollecting();
      await ctx.receiver.record(false);
    }
  } finally {
    await platform.stop();
  }

  const seen = new Map<string, number>();
  const byMinute: number[][] = [];
  for (const [id, at] of arrivals) {
    const ackAt = acked.get(id);
    const n = seen.get(id) ?? 0;
    seen.set(id, n + 1);
    if (ackAt === undefined || n >= 3) continue;
    const minute = Math.floor((ackAt - streamStart) / 60_000);
    (byMinute[minute] ??= []).push(at - ackAt);
  }
  const minutes: Minute[] = byMinute.map((lags, minute) => ({
    minute: minute + 1,
    firstAttempts: lags.length,
    p50Ms: round(percentile(lags, 50), 1),
    p99Ms: round(percentile(lags, 99), 1),
    maxMs: round(percentile(lags, 100), 1),
    state: states[minute + 1],
  }));
  // The last whole minute of the stream.
  const whole = minutes.filter((m) => m.firstAttempts >= cfg.rate * 3 * 50);
  const second = whole.find((m) => m.minute === 2);
  const last = whole.at(-1);
  return {
    lastOverSecondP99: second && last ? round(last.p99Ms / second.p99Ms, 2) : Number.NaN,
    details: { rate: cfg.rate, seconds: cfg.seconds, events: acked.size, start: states[0], minutes },
  };
}

/** Sizes, dead rows, vacuum runs and WAL of the platform's tables, and the process's RSS. */
async function sampleState(ctx: BenchContext, pid: number): Promise<Record<string, number>> {
  const { rows } = await ctx.db.raw<{ rows: Array<Record<string, string>> }>(`
    SELECT
      pg_total_relation_size('deliveries') AS deliveries_bytes,
      (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('events')) AS events_bytes,
      (SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree('attempts')) AS attempts_bytes,
      pg_total_relation_size('delivery_queue') AS queue_bytes,
      (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'delivery_queue') AS queue_dead,
      (SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'delivery_queue') AS queue_live,
      (SELECT autovacuum_count + vacuum_count FROM pg_stat_user_tables WHERE relname = 'delivery_queue') AS queue_vacuums,
      (SELECT sum(n_dead_tup) FROM pg_stat_user_tables WHERE relname LIKE 'deliveries%') AS deliveries_dead,
      (SELECT sum(autovacuum_count + vacuum_count) FROM pg_stat_user_tables WHERE relname LIKE 'deliveries%') AS deliveries_vacuums,
      (SELECT sum(autoanalyze_count + analyze_count) FROM pg_stat_user_tables WHERE relname LIKE 'deliveries%') AS deliveries_analyzes,
      (SELECT wal_bytes FROM pg_stat_wal) AS wal_bytes`);
  const state = Object.fromEntries(Object.entries(rows[0]!).map(([k, v]) => [k, Number(v)]));
  return { ...state, rssMb: round(rssBytes(pid) / 2 ** 20, 1) };
}
