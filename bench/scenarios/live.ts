import type { BenchContext } from '../lib/context.js';
import { streamSummary, withStreamTarget } from './latency.js';

export interface LiveResult {
  kneeRps: number;
  details: Record<string, unknown>;
}

const endpoints = 10;
const p99LimitMs = 100;
/** 202s coming back more slowly than this share of the offered rate: the platform did not take it. */
const minAnsweredShare = 0.95;

/** 100, 200, then +200 at a time up to `maxRps`. */
function kneeRates(maxRps: number): number[] {
  const rates = [100, 200];
  for (let rate = 400; rate <= maxRps; rate += 200) rates.push(rate);
  return rates.filter((rate) => rate <= maxRps);
}

/**
 * The knee: the highest publish rate at which one `all` process keeps 202 → receiver p99 within
 * 100 ms. The rates are stepped through on one process, warm as a live platform is (a cold start
 * is a different question), each with its first seconds left out;
 * a rate fails on p99 > 100 ms, on any failed publish (including 429s from the per-tenant request
 * budget, TENANT_RATE_LIMIT_PER_SECOND), when a delivery has not arrived by the end of the drain
 * wait, or when the 202s came back more than 5 % slower than the offered rate: 202 → receiver
 * stays low for a platform that takes events more slowly than offered while they queue in the
 * client, so that rate was not reached. Stepping stops at the first failure; kneeRps is the last
 * rate that passed (0 if 100 failed). Over 20 s, 5 % means the last 202 came more than ~1 s after
 * the schedule ended. The client keeps up to rate/10 requests in flight (100 ms worth, at least
 * 20), so its connection limit holds the rate back only when a publish takes more than 100 ms on
 * average.
 *
 * One tenant, 10 endpoints, each event delivered to ONE of them, round-robin (endpoint i subscribes
 * to `order.created.i` only), so deliveries per second equal events per second. Delivering every
 * event to all 10 would make 1,000 events/s 10,000 deliveries/s, above what even the bare dispatch
 * floor sends on 2 cores: the knee would then only restate dispatch throughput divided by 10.
 */
export async function runLive(ctx: BenchContext): Promise<LiveResult> {
  const cfg = ctx.config.live;
  const steps: Array<Record<string, unknown>> = [];
  let kneeRps = 0;
  await withStreamTarget(ctx, { label: 'live', endpoints, fanOut: 'roundRobin' }, async (measure) => {
    for (const rate of kneeRates(cfg.maxRps)) {
      const connections = Math.max(20, Math.ceil(rate / 10));
      const r = await measure({ rate, seconds: cfg.seconds, warmupSeconds: cfg.warmupSeconds, drainSeconds: cfg.drainSeconds, connections });
      const summary = streamSummary(r);
      const failures = [
        summary.publishFailed > 0 && `${summary.publishFailed} publishes failed`,
        summary.answeredRate < rate * minAnsweredShare && `202s came back at ${summary.answeredRate}/s`,
        summary.notArrivedWhenWaitingStopped > 0 && `${summary.notArrivedWhenWaitingStopped} deliveries had not arrived ${cfg.drainSeconds}s after the last publish`,
        summary.p99Ms > p99LimitMs && `p99 ${summary.p99Ms} ms > ${p99LimitMs} ms`,
      ].filter((f): f is string => typeof f === 'string');
      steps.push({ rate, connections, ...summary, publishStatusCodes: r.sent.statusCodes, passed: failures.length === 0, failures });
      ctx.log(`live: ${rate}/s → p50 ${summary.p50Ms} ms, p99 ${summary.p99Ms} ms: ${failures.length === 0 ? 'pass' : failures.join('; ')}`);
      if (failures.length > 0) break;
      kneeRps = rate;
    }
  });
  return {
    kneeRps,
    details: {
      endpoints,
      fanOut: 'round-robin: event n goes to endpoint n % 10 only, so deliveries/s = events/s',
      p99LimitMs,
      minAnsweredShare,
      seconds: cfg.seconds,
      warmupSeconds: cfg.warmupSeconds,
      drainSeconds: cfg.drainSeconds,
      maxRps: cfg.maxRps,
      reachedMaxRps: kneeRps === kneeRates(cfg.maxRps).at(-1),
      steps,
    },
  };
}
