import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { countRows } from '../lib/database.js';
import { busyShare, machineCpu } from '../lib/proc.js';
import { probeRoundTrips, sendList } from '../lib/load.js';
import { publishRequest } from '../lib/payload.js';
import { percentile, round } from '../lib/stats.js';
import { measureStream, streamSummary, type StreamSpec } from './latency.js';

export interface FairnessResult {
  ratio: number;
  details: Record<string, unknown>;
}

const noisyEndpoints = 5;
/** A p99 below this is taken as this, so a near-zero baseline cannot inflate the ratio. */
const p99FloorMs = 1;
/** How often the bare-request probe sends (see probeRoundTrips). */
const probeEveryMs = 20;

/**
 * What else the phase cost: the share of the machine's CPU that was busy, and the platform's event
 * loop delay (prom-client's p99 since the previous scrape, which resets it: a scrape starts a phase).
 */
async function phaseStart(platformUrl: string, probeUrl: string) {
  await fetch(`${platformUrl}/metrics`).then((r) => r.text());
  const stop = new AbortController();
  return { cpu: machineCpu(), stop, probe: probeRoundTrips(probeUrl, probeEveryMs, stop.signal) };
}

async function phaseEnd(platformUrl: string, started: Awaited<ReturnType<typeof phaseStart>>) {
  started.stop.abort();
  const rtts = await started.probe;
  const text = await fetch(`${platformUrl}/metrics`).then((r) => r.text());
  const lag = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN) * 1000;
  return {
    machineCpuBusy: round(busyShare(started.cpu, machineCpu()), 3),
    bareRequestP50Ms: round(percentile(rtts, 50), 2),
    bareRequestP99Ms: round(percentile(rtts, 99), 2),
    eventLoopDelayP50Ms: round(lag('nodejs_eventloop_lag_p50_seconds'), 1),
    eventLoopDelayP99Ms: round(lag('nodejs_eventloop_lag_p99_seconds'), 1),
    eventLoopDelayMaxMs: round(lag('nodejs_eventloop_lag_max_seconds'), 1),
  };
}

/**
 * Noisy neighbour, on one `all` process. Tenant B (1 endpoint) publishes a steady stream alone and
 * its 202 → receiver p99 is measured (after a warm-up, on the fresh process). Then B publishes the
 * same stream again while tenant A (5 endpoints, each its own receiver port, every event to all 5)
 * publishes a burst as fast as the API takes it over a bounded number of connections; B is
 * measured over the same number of seconds, starting with the burst and with nothing left out.
 * The burst keeps going until B's measurement is over (B's drain wait included), then stops.
 * ratio = B's p99 with the burst / B's p99 alone.
 */
export async function runFairness(ctx: BenchContext): Promise<FairnessResult> {
  const cfg = ctx.config.fairness;
  await resetState(ctx);
  const platform = await startMeasured(ctx, 'all', 'fairness-all');
  try {
    const noisy = await createTenant(platform, ctx.settings.adminToken, {
      name: 'fair-a',
      endpointUrls: Array.from({ length: noisyEndpoints }, (_, i) => ctx.receiver.okUrl(i, `fair-a/${i}`)),
    });
    const quiet = await createTenant(platform, ctx.settings.adminToken, { name: 'fair-b', endpointUrls: [ctx.receiver.okUrl(noisyEndpoints, 'fair-b')] });
    const stream: StreamSpec = {
      rate: cfg.rate,
      seconds: cfg.seconds,
      warmupSeconds: 0,
      drainSeconds: cfg.drainSeconds,
      eventType: () => 'order.created',
      deliveriesPerEvent: 1,
    };

    ctx.log(`fairness: tenant B alone, ${cfg.rate} events/s for ${cfg.warmupSeconds}+${cfg.seconds}s`);
    // The probe's own port: a receiver port no endpoint uses.
    const probeUrl = ctx.receiver.okUrl(noisyEndpoints + 1, 'probe');
    let phase = await phaseStart(platform.url, probeUrl);
    const alone = await measureStream(ctx, platform.url, quiet.apiKey, { ...stream, seconds: cfg.warmupSeconds + cfg.seconds, warmupSeconds: cfg.warmupSeconds });
    const aloneMachine = await phaseEnd(platform.url, phase);

    // Built before the clock starts, so making the bodies does not compete with B's stream.
    const burstRequests = Array.from({ length: cfg.burst }, (_, i) => publishRequest(noisy.apiKey, i, 'order.created', ctx.config.payloadBytes));
    ctx.log(`fairness: tenant B again while tenant A publishes a burst of ${cfg.burst} events (${cfg.burstConnections} connections)`);
    const stopBurst = new AbortController();
    const burst = sendList(platform.url, burstRequests, cfg.burstConnections, stopBurst.signal);
    burst.catch(() => undefined); // awaited below; a failure must not surface as an unhandled rejection first
    let withBurst;
    phase = await phaseStart(platform.url, probeUrl);
    let burstMachine;
    try {
      withBurst = await measureStream(ctx, platform.url, quiet.apiKey, stream);
      burstMachine = await phaseEnd(platform.url, phase);
    } finally {
      stopBurst.abort();
    }
    const burstResult = await burst;
    const noisyDelivered = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE tenant_id = ? AND status = 'succeeded'", [noisy.id]);

    const aloneSummary = streamSummary(alone);
    const burstSummary = streamSummary(withBurst);
    for (const [phase, s] of [['alone', aloneSummary], ['with burst', burstSummary]] as const) {
      if (s.publishFailed > 0) throw new Error(`fairness: ${s.publishFailed} of tenant B's publishes failed (${phase})`);
    }
    ctx.log(`fairness: B p99 alone ${aloneSummary.p99Ms} ms, with A's burst ${burstSummary.p99Ms} ms`);
    const bareRatio = burstMachine.bareRequestP99Ms / Math.max(aloneMachine.bareRequestP99Ms, p99FloorMs);
    return {
      ratio: round(burstSummary.p99Ms / Math.max(aloneSummary.p99Ms, p99FloorMs), 3),
      details: {
        // The same ratio for a bare HTTP round trip between two other processes: what the load alone does.
        bareRequestRatio: round(bareRatio, 3),
        rate: cfg.rate,
        seconds: cfg.seconds,
        p99FloorMs,
        alone: { ...aloneSummary, machine: aloneMachine },
        withBurst: { ...burstSummary, machine: burstMachine },
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
