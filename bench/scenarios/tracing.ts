import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, waitUntil, withSetupApi, type BenchContext } from '../lib/context.js';
import { countRows, insertBacklog } from '../lib/database.js';
import { closedLoop } from '../lib/load.js';
import { signedCallbacks, type SignedSource } from '../lib/payload.js';
import { round } from '../lib/stats.js';

export interface TracingResult {
  /** The worse of intake's and dispatch's throughput with tracing off over tracing on at ratio 1.0. */
  overheadRatio: number;
  details: Record<string, unknown>;
}

/**
 * Tracing on, exported over OTLP/HTTP to `sinkUrl` (only OTEL_* variables): by default every event
 * sampled (BENCH_TRACING_SAMPLER and _ARG change it, e.g. always_off for the cost of tracing that
 * keeps nothing).
 */
const tracingEnv = (sinkUrl: string, sampler: { name: string; arg: string }) => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
  OTEL_TRACES_SAMPLER: sampler.name,
  OTEL_TRACES_SAMPLER_ARG: sampler.arg,
});

/**
 * An OTLP/HTTP endpoint that reads and discards what it is sent, standing in for a collector: it
 * answers at once, so the cost measured is the platform's (making, batching, serialising, sending).
 */
async function startSink(): Promise<{ url: string; bytes: () => number; close: () => Promise<void> }> {
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bytes: () => bytes, close: () => new Promise((r) => server.close(() => r())) };
}

/**
 * The cost of tracing at a sample ratio of 1.0, against tracing off, on intake and on dispatch.
 * Each is measured in `rounds` alternating pairs (off, on, off, on …) so a drift of the machine
 * during the run weighs on both sides; the ratio is the sum of the off rates over the sum of the on
 * rates. Intake: signed callbacks at the maximum rate over a fixed time, api role alone. Dispatch:
 * a backlog whose events were accepted traced (their fan-out span stored, as intake with tracing on
 * stores it), drained by one worker; every attempt then reads its parent and exports two spans.
 */
export async function runTracing(ctx: BenchContext): Promise<TracingResult> {
  const cfg = ctx.config.tracing;
  const sink = await startSink();
  try {
    const intake = { off: [] as number[], on: [] as number[] };
    const dispatch = { off: [] as number[], on: [] as number[] };
    for (let round = 0; round < cfg.rounds; round++) {
      for (const mode of ['off', 'on'] as const) {
        const env = mode === 'on' ? tracingEnv(sink.url, cfg.sampler) : {};
        intake[mode].push(await intakeRate(ctx, env, round * 2 + (mode === 'on' ? 1 : 0)));
        ctx.log(`tracing: intake ${mode} ${Math.round(intake[mode].at(-1)!)}/s`);
        dispatch[mode].push(await dispatchRate(ctx, env));
        ctx.log(`tracing: dispatch ${mode} ${Math.round(dispatch[mode].at(-1)!)}/s`);
      }
    }
    const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
    const intakeRatio = sum(intake.off) / sum(intake.on);
    const dispatchRatio = sum(dispatch.off) / sum(dispatch.on);
    return {
      overheadRatio: round(Math.max(intakeRatio, dispatchRatio), 3),
      details: {
        sampler: `${cfg.sampler.name} ${cfg.sampler.arg}`,
        intakeRatio: round(intakeRatio, 3),
        dispatchRatio: round(dispatchRatio, 3),
        intakeRps: { off: intake.off.map((r) => round(r)), on: intake.on.map((r) => round(r)) },
        dispatchRps: { off: dispatch.off.map((r) => round(r)), on: dispatch.on.map((r) => round(r)) },
        exportedMb: round(sink.bytes() / 2 ** 20, 1),
      },
    };
  } finally {
    await sink.close();
  }
}

async function intakeRate(ctx: BenchContext, env: Record<string, string>, offsetBlock: number): Promise<number> {
  const cfg = ctx.config.tracing;
  await resetState(ctx);
  const api = await startMeasured(ctx, 'api', 'tracing-intake', env);
  try {
    const sources: SignedSource[] = [];
    for (let t = 0; t < 4; t++) {
      const tenant = await createTenant(api, ctx.settings.adminToken, {
        name: `tracing-${t}`,
        endpointUrls: [ctx.receiver.okUrl(0, `tr${t}/a`), ctx.receiver.okUrl(1, `tr${t}/b`)],
        source: true,
      });
      sources.push(tenant.source!);
    }
    const pool = signedCallbacks(sources, 6_000 * (cfg.intakeSeconds + cfg.warmupSeconds), ctx.config.payloadBytes, offsetBlock * 10_000_000);
    let i = 0;
    const next = () => pool[i++ % pool.length]!;
    await closedLoop(api.url, next, cfg.connections, cfg.warmupSeconds);
    const measured = await closedLoop(api.url, next, cfg.connections, cfg.intakeSeconds);
    if (i > pool.length) throw new Error('tracing: the signed callback pool ran dry; repeats would measure the duplicate path');
    return measured.rps;
  } finally {
    await api.stop();
  }
}

async function dispatchRate(ctx: BenchContext, env: Record<string, string>): Promise<number> {
  const cfg = ctx.config.tracing;
  await resetState(ctx);
  const tenant = await withSetupApi(ctx, (api) =>
    createTenant(api, ctx.settings.adminToken, {
      name: 'tracing-dispatch',
      endpointUrls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `tracing/${i}`)),
      maxConcurrency: 10,
    }),
  );
  const perEndpoint = Math.ceil(cfg.backlog / cfg.endpoints);
  const backlog = await insertBacklog(
    ctx.db,
    tenant.id,
    tenant.endpointIds.map((endpointId) => ({ endpointId, count: perEndpoint })),
    ctx.config.payloadBytes,
    { traced: true },
  );
  await ctx.receiver.reset();
  const worker = await startMeasured(ctx, 'worker', 'tracing-worker', env);
  const succeeded = () => countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'");
  try {
    // From the first success on, so the worker's start is not part of the rate.
    const first = await waitUntil(async () => {
      const n = await succeeded();
      return n > 0 && { n, at: Date.now() };
    }, 'tracing: the first delivery', 60_000, 50);
    await waitUntil(async () => (await succeeded()) === backlog, 'tracing: the backlog drained', cfg.maxDrainSeconds * 1000, 100);
    return (backlog - first.n) / ((Date.now() - first.at) / 1000);
  } finally {
    await worker.stop();
    await sleep(200);
  }
}
