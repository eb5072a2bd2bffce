import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createTenant } from '../lib/api.js';
import { resetState, startMeasured, waitUntil, withSetupApi, type BenchContext } from '../lib/context.js';
import { countRows, insertBacklog } from '../lib/database.js';
import { paced } from '../lib/load.js';
import { signedCallbacks, type SignedSource } from '../lib/payload.js';
import { median, round } from '../lib/stats.js';
import { CpuBudget } from '../lib/cpu-budget.js';

export interface TracingResult {
  /**
   * The worse of intake's and dispatch's cost with tracing on at ratio 1.0 over tracing off: the
   * platform's CPU per callback (api process and its PostgreSQL backends) and per delivery (worker
   * and its backends), from /proc. Throughput ratios are in the details.
   */
  overheadRatio: number;
  details: Record<string, unknown>;
}

/** One measurement: the rate, and the platform's CPU milliseconds per callback or delivery. */
interface Run {
  rps: number;
  cpuMs: number;
  /** Of cpuMs, PostgreSQL's share: the rest is the api's or the worker's. */
  postgresMs: number;
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
 * during the run weighs on both sides. The cost is CPU per unit of work, which other load on the
 * machine barely moves, where it moves throughput by tens of percent from one run to the next
 * (docs/performance.md, "Tracing's cost"); the rates are reported beside it.
 *
 * Intake: signed callbacks at one fixed rate for both sides (BENCH_TRACING_INTAKE_RATE), api role
 * alone. At the maximum rate, tracing's own CPU would lower the rate, smaller group commits would
 * then cost PostgreSQL more per callback, and that would be charged to tracing too. Dispatch: a
 * backlog whose events were accepted traced (their fan-out span stored, as intake with tracing on
 * stores it), drained by one worker as fast as it goes; every attempt then exports its span. Like
 * intake, dispatch is measured warm: the worker first drains BENCH_TRACING_WARMUP_BACKLOG
 * deliveries, whose cost (the compiling of the tracing code in it) the details report apart.
 */
export async function runTracing(ctx: BenchContext): Promise<TracingResult> {
  const cfg = ctx.config.tracing;
  const sink = await startSink();
  try {
    const intake = { off: [] as Run[], on: [] as Run[] };
    const dispatch = { off: [] as Run[], on: [] as Run[] };
    const dispatchCold = { off: [] as Run[], on: [] as Run[] };
    for (let round = 0; round < cfg.rounds; round++) {
      for (const mode of ['off', 'on'] as const) {
        const env = mode === 'on' ? tracingEnv(sink.url, cfg.sampler) : {};
        if (cfg.parts.includes('intake')) {
          intake[mode].push(await intakeRate(ctx, env, round * 2 + (mode === 'on' ? 1 : 0)));
          ctx.log(`tracing: intake ${mode} ${Math.round(intake[mode].at(-1)!.rps)}/s, ${intake[mode].at(-1)!.cpuMs.toFixed(3)} ms CPU per callback`);
        }
        if (cfg.parts.includes('dispatch')) {
          const { cold, warm } = await dispatchRates(ctx, env);
          if (cold) dispatchCold[mode].push(cold);
          dispatch[mode].push(warm);
          const coldNote = cold ? ` (its first ${cfg.warmupBacklog}: ${cold.cpuMs.toFixed(3)})` : '';
          ctx.log(`tracing: dispatch ${mode} ${Math.round(warm.rps)}/s, ${warm.cpuMs.toFixed(3)} ms CPU per delivery${coldNote}`);
        }
      }
    }
    const sum = (runs: Run[], key: keyof Run) => runs.reduce((a, r) => a + r[key], 0);
    const intakeCpuRatio = medianPairRatio(intake);
    const dispatchCpuRatio = medianPairRatio(dispatch);
    const list = (runs: Run[], key: keyof Run, digits: number) => runs.map((r) => round(r[key], digits));
    return {
      overheadRatio: round(Math.max(intakeCpuRatio, dispatchCpuRatio), 3),
      details: {
        sampler: `${cfg.sampler.name} ${cfg.sampler.arg}`,
        intakeCpuRatio: round(intakeCpuRatio, 3),
        dispatchCpuRatio: round(dispatchCpuRatio, 3),
        // The same over all rounds pooled (sum on / sum off), which one disturbed round moves.
        intakeCpuRatioPooled: round(sum(intake.on, 'cpuMs') / sum(intake.off, 'cpuMs'), 3),
        dispatchCpuRatioPooled: round(sum(dispatch.on, 'cpuMs') / sum(dispatch.off, 'cpuMs'), 3),
        intakeRpsRatio: round(sum(intake.off, 'rps') / sum(intake.on, 'rps'), 3),
        dispatchRpsRatio: round(sum(dispatch.off, 'rps') / sum(dispatch.on, 'rps'), 3),
        intakeRps: { off: list(intake.off, 'rps', 0), on: list(intake.on, 'rps', 0) },
        intakeCpuMsPerCallback: { off: list(intake.off, 'cpuMs', 3), on: list(intake.on, 'cpuMs', 3) },
        dispatchRps: { off: list(dispatch.off, 'rps', 0), on: list(dispatch.on, 'rps', 0) },
        dispatchCpuMsPerDelivery: { off: list(dispatch.off, 'cpuMs', 3), on: list(dispatch.on, 'cpuMs', 3) },
        intakePostgresMsPerCallback: { off: list(intake.off, 'postgresMs', 3), on: list(intake.on, 'postgresMs', 3) },
        dispatchPostgresMsPerDelivery: { off: list(dispatch.off, 'postgresMs', 3), on: list(dispatch.on, 'postgresMs', 3) },
        // A fresh worker's warm-up drain, which pays for compiling the tracing code as well.
        ...(dispatchCold.on.length > 0 && {
          dispatchWarmupBacklog: cfg.warmupBacklog,
          dispatchColdCpuRatio: round(medianPairRatio(dispatchCold), 3),
          dispatchColdCpuMsPerDelivery: { off: list(dispatchCold.off, 'cpuMs', 3), on: list(dispatchCold.on, 'cpuMs', 3) },
        }),
        exportedMb: round(sink.bytes() / 2 ** 20, 1),
      },
    };
  } finally {
    await sink.close();
  }
}

/**
 * The median over rounds of on / off, each round's pair measured within a minute of each other
 * (off, then the other side's off, then on): another process's burst lands on one side of one
 * pair, and the median leaves that pair out, where a pooled ratio carries it (docs/performance.md,
 * "Tracing's cost").
 */
function medianPairRatio(runs: { off: Run[]; on: Run[] }): number {
  return median(runs.on.map((on, i) => on.cpuMs / runs.off[i]!.cpuMs));
}

async function intakeRate(ctx: BenchContext, env: Record<string, string>, offsetBlock: number): Promise<Run> {
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
    const pool = signedCallbacks(sources, cfg.intakeRate * (cfg.intakeSeconds + cfg.warmupSeconds), ctx.config.payloadBytes, offsetBlock * 10_000_000);
    let i = 0;
    const next = () => pool[i++ % pool.length]!;
    const load = (seconds: number) => paced(api.url, next, { rate: cfg.intakeRate, seconds, connections: cfg.connections });
    await load(cfg.warmupSeconds);
    const budget = new CpuBudget(ctx.db, { api: [api.pid] });
    await budget.start();
    const measured = await load(cfg.intakeSeconds);
    const cpu = await budget.stop();
    if (i > pool.length) throw new Error('tracing: the signed callback pool ran dry; repeats would measure the duplicate path');
    if (measured.failed > 0) throw new Error(`tracing: ${measured.failed} callbacks failed (${JSON.stringify(measured.statusCodes)})`);
    return { rps: measured.answeredRate, cpuMs: ((cpu.api! + cpu.postgres!) * 1000) / measured.ok, postgresMs: (cpu.postgres! * 1000) / measured.ok };
  } finally {
    await api.stop();
  }
}

/**
 * One worker's dispatch cost: a fresh worker drains a warm-up backlog, then the measured one
 * (`cold` is the warm-up's drain, undefined when there is none). Each backlog is inserted in one
 * transaction while the worker runs, so it sees all of it at once; the window opens at the first
 * delivery done and closes when the last one is.
 */
async function dispatchRates(ctx: BenchContext, env: Record<string, string>): Promise<{ cold?: Run; warm: Run }> {
  const cfg = ctx.config.tracing;
  await resetState(ctx);
  const tenant = await withSetupApi(ctx, (api) =>
    createTenant(api, ctx.settings.adminToken, {
      name: 'tracing-dispatch',
      endpointUrls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `tracing/${i}`)),
      maxConcurrency: 10,
    }),
  );
  const worker = await startMeasured(ctx, 'worker', 'tracing-worker', env);
  try {
    const drain = (deliveries: number) => drainBacklog(ctx, worker.pid, tenant, Math.ceil(deliveries / cfg.endpoints));
    const cold = cfg.warmupBacklog > 0 ? await drain(cfg.warmupBacklog) : undefined;
    // The warm-up's dead rows vacuumed now, so that autovacuum does not take them in the window.
    if (cold) await ctx.db.raw('VACUUM (ANALYZE) deliveries, delivery_queue');
    return { cold, warm: await drain(cfg.backlog) };
  } finally {
    await worker.stop();
    await sleep(200);
  }
}

async function drainBacklog(ctx: BenchContext, workerPid: number, tenant: { id: string; endpointIds: string[] }, perEndpoint: number): Promise<Run> {
  const cfg = ctx.config.tracing;
  const succeededBefore = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'");
  await ctx.receiver.reset();
  const backlog = await insertBacklog(
    ctx.db,
    tenant.id,
    tenant.endpointIds.map((endpointId) => ({ endpointId, count: perEndpoint })),
    ctx.config.payloadBytes,
    { traced: true, oneTransaction: true },
  );
  // The queue table holds only unfinished deliveries, so polling it stays cheap as it drains: the
  // bench's own backend counts among PostgreSQL's CPU.
  const unfinished = () => countRows(ctx.db, 'SELECT count(*) AS n FROM delivery_queue');
  const budget = new CpuBudget(ctx.db, { worker: [workerPid] });
  const first = await waitUntil(async () => {
    const n = await unfinished();
    if (n === backlog) return false;
    await budget.start();
    return { n, at: Date.now() };
  }, 'tracing: the first delivery', 60_000, 50);
  await waitUntil(async () => (await unfinished()) === 0, 'tracing: the backlog drained', cfg.maxDrainSeconds * 1000, 100);
  const seconds = (Date.now() - first.at) / 1000;
  const cpu = await budget.stop();
  const succeeded = (await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'")) - succeededBefore;
  if (succeeded !== backlog) throw new Error(`tracing: ${succeeded} of ${backlog} deliveries succeeded`);
  return { rps: first.n / seconds, cpuMs: ((cpu.worker! + cpu.postgres!) * 1000) / first.n, postgresMs: (cpu.postgres! * 1000) / first.n };
}
