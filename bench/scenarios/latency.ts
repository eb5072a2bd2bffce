import { randomUUID } from 'node:crypto';
import { createTenant } from '../lib/api.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { paced } from '../lib/load.js';
import { payloadData, type PreparedRequest } from '../lib/payload.js';
import { percentile, round } from '../lib/stats.js';

export interface LatencyResult {
  p99Ms: number;
  details: Record<string, unknown>;
}

/**
 * End-to-end latency: `npm start`-style role `all`, events published with POST /v1/events at a
 * steady rate (evenly spaced, open loop). For each delivery: the receiver's arrival time minus the
 * moment the 202 had arrived at the client, matched by webhook-id (= event id). Both clocks are the
 * same machine's Date.now(). Events sent during the warm-up seconds are left out.
 */
export async function runLatency(ctx: BenchContext): Promise<LatencyResult> {
  const cfg = ctx.config.latency;
  await resetState(ctx);
  const platform = await startMeasured(ctx, 'all', 'latency-all');
  const acked = new Map<string, number>();
  let arrivals: Array<[string, number]> = [];
  let sent;
  let stoppedWaitingAt = 0;
  try {
    const tenant = await createTenant(platform, ctx.settings.adminToken, {
      name: 'latency',
      endpointUrls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `latency/${i}`)),
    });
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${tenant.apiKey}` };
    let n = 0;
    const next = (): PreparedRequest => {
      const i = n++;
      return {
        path: '/v1/events',
        headers: { ...headers, 'idempotency-key': randomUUID() },
        body: JSON.stringify({ type: 'order.created', messageId: `ord_${i}`, data: payloadData(i, ctx.config.payloadBytes) }),
      };
    };
    const warmupIndex = cfg.rate * cfg.warmupSeconds;
    await ctx.receiver.reset();
    await ctx.receiver.record(true);
    ctx.log(`latency: ${cfg.rate} events/s for ${cfg.seconds}s through role all`);
    sent = await paced(platform.url, next, {
      rate: cfg.rate,
      seconds: cfg.seconds,
      connections: 20,
      onResponse: (_req, status, body, at, index) => {
        if (status === 202 && index >= warmupIndex) acked.set((JSON.parse(body) as { id: string }).id, at);
      },
    });
    if (sent.failed > 0) throw new Error(`latency: ${sent.failed} of ${sent.sent} publishes failed: ${JSON.stringify(sent.statusCodes)}`);
    const expected = sent.ok * cfg.endpoints;
    const deadline = Date.now() + cfg.drainSeconds * 1000;
    while (arrivals.length < expected && Date.now() < deadline) {
      arrivals = arrivals.concat(await ctx.receiver.arrivals());
      await sleep(250);
    }
    arrivals = arrivals.concat(await ctx.receiver.arrivals());
    stoppedWaitingAt = Date.now();
  } finally {
    await ctx.receiver.record(false);
    await platform.stop();
  }
  const latencies: number[] = [];
  const seen = new Map<string, number>();
  for (const [id, at] of arrivals) {
    const ackAt = acked.get(id);
    if (ackAt === undefined) continue; // a warm-up event
    if ((seen.get(id) ?? 0) >= cfg.endpoints) continue; // a repeat (retry) after the first arrival
    latencies.push(at - ackAt);
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  // Deliveries that had not arrived when waiting stopped count with the time they had waited by
  // then: a lower bound, so a platform that falls behind cannot look faster by losing the tail.
  let missing = 0;
  for (const [id, ackAt] of acked) {
    for (let k = seen.get(id) ?? 0; k < cfg.endpoints; k++) {
      latencies.push(stoppedWaitingAt - ackAt);
      missing++;
    }
  }
  return {
    p99Ms: percentile(latencies, 99),
    details: {
      rate: cfg.rate,
      achievedRate: round(sent.achievedRate),
      measuredDeliveries: latencies.length,
      endpoints: cfg.endpoints,
      notArrivedWhenWaitingStopped: missing,
      p50Ms: percentile(latencies, 50),
      p90Ms: percentile(latencies, 90),
      p99Ms: percentile(latencies, 99),
      maxMs: Math.max(...latencies),
      publishP99Ms: round(percentile(sent.latenciesMs, 99), 2),
    },
  };
}
