import { epochMs } from '../lib/clock.js';
import os from 'node:os';
import { createTenant } from '../lib/api.js';
import { runToEnd, startPlatform, type PlatformProcess, type Runtime } from '../lib/children.js';
import { resetState, startMeasured, waitUntil, withSetupApi, type BenchContext } from '../lib/context.js';
import { countRows, insertBacklog } from '../lib/database.js';
import { stringifyJson } from '../../src/domain/raw-json.js';
import { payloadData } from '../lib/payload.js';
import { cpuSeconds, mb, peakRssBytes, rssBytes } from '../lib/proc.js';
import { round } from '../lib/stats.js';
import { CpuBudget, cpuBoundRatio, perUnitMs } from '../lib/cpu-budget.js';
import { PgSampler } from '../lib/pg-sampler.js';
import { pgCounters, perUnit, tableCounters } from '../lib/pg-stats.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface DispatchResult {
  rps: number;
  floorRps: number;
  ratio: number;
  /** Peak RSS (VmHWM) of the worker process that held the backlog, in MiB. */
  rssMb: number;
  idleRssMb: number;
  backlog: number;
  details: Record<string, unknown>;
}

/**
 * Dispatch (and memory): a backlog of pending deliveries spread evenly over N endpoints, each on its
 * own receiver port, created in SQL while no worker runs. Then the worker(s) start and the clock
 * runs from the first request at the receiver until the database shows every delivery succeeded,
 * each with its attempt row (the normal code path). The worker's peak RSS is read from
 * /proc/<pid>/status (VmHWM) before it stops.
 */
export async function runDispatch(ctx: BenchContext): Promise<DispatchResult> {
  const { dispatch: cfg, payloadBytes } = ctx.config;
  await resetState(ctx);
  const tenant = await withSetupApi(ctx, (api) =>
    createTenant(api, ctx.settings.adminToken, {
      name: 'dispatch',
      endpointUrls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `dispatch/${i}`)),
      maxConcurrency: cfg.endpointConcurrency,
    }),
  );
  const perEndpoint = Math.ceil(cfg.backlog / cfg.endpoints);
  ctx.log(`dispatch: inserting ${perEndpoint * cfg.endpoints} pending deliveries over ${cfg.endpoints} endpoints`);
  const backlog = await insertBacklog(ctx.db, tenant.id, tenant.endpointIds.map((endpointId) => ({ endpointId, count: perEndpoint })), payloadBytes);
  await ctx.receiver.reset();
  await sleep(1_100); // lets PostgreSQL publish the bulk insert's counters before the snapshot
  const pgBefore = await pgCounters(ctx.db);
  const tableBefore = await tableCounters(ctx.db, 'deliveries');

  ctx.log(`dispatch: starting ${cfg.workers} worker process(es)`);
  const workers: PlatformProcess[] = [];
  for (let i = 0; i < cfg.workers; i++) workers.push(await startMeasured(ctx, 'worker', `dispatch-worker-${i}`));
  // What a started worker takes before any work, to tell the backlog's share of the peak apart.
  const startedRssMb = workers.map((w) => round(mb(rssBytes(w.pid))));
  let sampledPeak = 0;
  const timeline: Array<[number, number]> = [];
  let drained: Drain;
  let peaks: number[];
  let cpu: Record<string, number>;
  let pgActivity: ReturnType<PgSampler['stop']> | undefined;
  try {
    const sampler = setInterval(() => {
      for (const w of workers) {
        try {
          sampledPeak = Math.max(sampledPeak, rssBytes(w.pid));
        } catch {
          // exited
        }
      }
    }, 250);
    try {
      const budget = new CpuBudget(ctx.db, { worker: workers.map((w) => w.pid), receiver: [ctx.receiver.child.pid] });
      const pgSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
      drained = await waitForDrain(ctx, backlog, timeline, cfg.maxDrainSeconds * 1000, async () => {
        pgSampler?.start();
        await budget.start();
      });
      cpu = await budget.stop();
      pgActivity = pgSampler?.stop();
    } finally {
      clearInterval(sampler);
    }
    peaks = workers.map((w) => peakRssBytes(w.pid));
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
  await sleep(1_100);
  const pgAfter = await pgCounters(ctx.db);
  const tableAfter = await tableCounters(ctx.db, 'deliveries');

  // Every success must have its attempt on record (a row, or its first try stored in the delivery).
  const attempts = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a WHERE a.outcome = 'success'");
  const succeeded = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'");
  if (attempts !== succeeded) throw new Error(`dispatch: ${succeeded} deliveries succeeded but ${attempts} successful attempts were logged`);
  if (drained.complete && succeeded !== backlog) throw new Error(`dispatch: ${succeeded} of ${backlog} deliveries succeeded`);
  const seconds = (drained.endedAt - drained.firstAt) / 1000;
  const rps = drained.delivered / seconds;

  const idle = await idleRss(ctx);
  const cycle = await cycleBreakdown(ctx, cfg.endpointConcurrency);
  const floor = await runDispatchFloor(ctx);
  const cpuMs = perUnitMs(cpu, drained.delivered);
  return {
    rps: round(rps),
    floorRps: round(floor.rps),
    ratio: round(rps / floor.rps, 3),
    rssMb: round(mb(Math.max(...peaks))),
    idleRssMb: idle.compiled.worker,
    backlog,
    details: {
      workers: cfg.workers,
      endpoints: cfg.endpoints,
      endpointConcurrency: cfg.endpointConcurrency,
      drainSeconds: round(seconds, 2),
      drainedCompletely: drained.complete,
      deliveredInWindow: drained.delivered,
      ...rateByQuarter(timeline, drained.delivered),
      // From the first delivery to the last: what each process spent per delivery.
      cpuMsPerDelivery: cpuMs,
      // The floor's client + receiver against the worker, receiver and PostgreSQL per delivery.
      cpuBoundRatio: cpuBoundRatio(cpuMs, floor.cpuMsPerRequest),
      cpuShareOfMachine: round((Object.values(cpu).reduce((a, b) => a + b, 0) / seconds / os.cpus().length) * 100),
      postgresPerDelivery: perUnit(pgBefore, pgAfter, succeeded),
      deliveriesTable: {
        indexes: tableAfter.indexes,
        updatesPerDelivery: round((tableAfter.updates - tableBefore.updates) / succeeded, 2),
        hotUpdateShare: round((tableAfter.hotUpdates - tableBefore.hotUpdates) / Math.max(1, tableAfter.updates - tableBefore.updates), 3),
      },
      cycleMs: cycle,
      peakRssMbPerWorker: peaks.map((p) => round(mb(p))),
      rssMbAtStartPerWorker: startedRssMb,
      idleRssMb: idle,
      sampledPeakRssMb: round(mb(sampledPeak)),
      floor,
      ...(pgActivity && { pgActivity }),
      timeline,
    },
  };
}

/**
 * Waits until every delivery succeeded, or until `maxMs` after the first one. Progress comes from
 * the receiver's counter (cheap, every 250 ms); the database decides what counts as delivered.
 */
interface Drain {
  firstAt: number;
  endedAt: number;
  delivered: number;
  complete: boolean;
}

async function waitForDrain(ctx: BenchContext, total: number, timeline: Array<[number, number]>, maxMs: number, onFirst: () => Promise<void>): Promise<Drain> {
  const started = epochMs();
  let lastLog = started;
  let firstAt: number | undefined;
  for (;;) {
    const counts = await ctx.receiver.counts();
    const seen = counts.counts.reduce((a, b) => a + b, 0);
    if (counts.firstAt !== null && firstAt === undefined) {
      firstAt = counts.firstAt;
      await onFirst(); // the worker has started up: CPU from here on is dispatch work
    }
    if (firstAt !== undefined) timeline.push([round((epochMs() - firstAt) / 1000, 2), seen]);
    if (epochMs() - lastLog > 10_000) {
      lastLog = epochMs();
      ctx.log(`dispatch: ${seen}/${total} delivered`);
    }
    if (seen >= total) break;
    if (firstAt !== undefined && epochMs() - firstAt > maxMs) {
      const delivered = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'");
      ctx.log(`dispatch: stopping after ${maxMs / 1000}s with ${delivered}/${total} delivered (BENCH_DISPATCH_MAX_DRAIN_SECONDS)`);
      return { endedAt: epochMs(), firstAt, delivered, complete: false };
    }
    if (firstAt === undefined && epochMs() - started > 120_000) throw new Error('dispatch: nothing delivered within 120 s');
    await sleep(250);
  }
  await waitUntil(
    async () => (await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'")) >= total,
    'every delivery recorded as succeeded',
    30_000,
    50,
  );
  return { endedAt: epochMs(), firstAt: firstAt!, delivered: total, complete: true };
}

/**
 * Where one delivery slot's time goes, from the rows the run left: with `slots` concurrent attempts
 * per endpoint, attempt k can only start once attempt k - slots of the same endpoint has finished,
 * so "slot freed → next send" is admission, the queue hand-off and the claim; then the HTTP attempt
 * (attempts.duration_ms); then the wait until the result statement started (succeeded_at is its
 * now()). Their sum is the slot's cycle; per endpoint, throughput = slots / cycle.
 */
async function cycleBreakdown(ctx: BenchContext, slots: number): Promise<Record<string, number>> {
  const { rows } = await ctx.db.raw<{ rows: Array<{ to_send: number; http: number; to_record: number }> }>(
    `WITH s AS (
       SELECT a.started_at, a.duration_ms, d.succeeded_at,
              lag(d.succeeded_at, ?) OVER (PARTITION BY d.endpoint_id ORDER BY a.started_at) AS freed_at
         FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a
        WHERE a.outcome = 'success')
     SELECT avg(extract(epoch FROM started_at - freed_at)) * 1000 AS to_send,
            avg(duration_ms)::float8 AS http,
            avg(extract(epoch FROM succeeded_at - started_at)) * 1000 - avg(duration_ms) AS to_record
       FROM s WHERE freed_at IS NOT NULL`,
    [slots],
  );
  const r = rows[0];
  if (!r || r.to_send === null) return {};
  const [toSend, http, toRecord] = [Number(r.to_send), Number(r.http), Number(r.to_record)];
  return {
    slotFreedToNextSend: round(toSend),
    httpAttempt: round(http),
    attemptEndToRecord: round(toRecord),
    slotCycle: round(toSend + http + toRecord),
  };
}

/** Delivery rate in each quarter of the backlog: shows whether cost grows as the backlog shrinks. */
function rateByQuarter(timeline: Array<[number, number]>, total: number): { ratePerQuarter: number[] } {
  const rates: number[] = [];
  let prev: [number, number] = [0, 0];
  for (let q = 1; q <= 4; q++) {
    const point = timeline.find(([, n]) => n >= (total * q) / 4) ?? timeline[timeline.length - 1];
    if (!point) break;
    rates.push(round((point[1] - prev[1]) / Math.max(0.001, point[0] - prev[0])));
    prev = point;
  }
  return { ratePerQuarter: rates };
}

/** The floor: a raw undici POST loop to the same receiver ports, at the same total concurrency. */
async function runDispatchFloor(ctx: BenchContext) {
  const { dispatch: cfg, payloadBytes } = ctx.config;
  // The bytes the platform sends for such an event, built by its own rule (db/functions/event_body.sql).
  const { rows } = await ctx.db.raw<{ rows: Array<{ body: string }> }>(`SELECT event_body(NULL, ?, 'order.created', now(), NULL, ?) AS body`, [
    'evt_01jdxxxxxxxxxxxxxxxxxxxxxx',
    stringifyJson(payloadData(0, payloadBytes))!,
  ]);
  const body = rows[0]!.body;
  const args = {
    urls: Array.from({ length: cfg.endpoints }, (_, i) => ctx.receiver.okUrl(i, `floor/${i}`)),
    perUrl: cfg.endpointConcurrency,
    seconds: cfg.floorSeconds,
    warmupSeconds: 2,
    body,
  };
  ctx.log(`dispatch floor: ${cfg.endpoints * cfg.endpointConcurrency} concurrent undici loops for ${cfg.floorSeconds}s`);
  const receiverBefore = cpuSeconds(ctx.receiver.child.pid);
  const line = await runToEnd('dispatch floor', 'bench/lib/floor-dispatch-process.ts', [JSON.stringify(args)]);
  const receiverCpu = cpuSeconds(ctx.receiver.child.pid) - receiverBefore; // includes the warm-up
  const result = JSON.parse(line) as { rps: number; ok: number; failed: number; cpuMsPerRequest: number };
  return {
    rps: round(result.rps),
    ok: result.ok,
    failed: result.failed,
    concurrency: cfg.endpoints * cfg.endpointConcurrency,
    cpuMsPerRequest: { client: round(result.cpuMsPerRequest, 3), receiver: round((receiverCpu * 1000) / (result.ok * (1 + args.warmupSeconds / args.seconds)), 3) },
  };
}

/**
 * Idle RSS of a started api and worker with nothing to do, compiled (as production runs them) and
 * through tsx (as `npm start` does): tsx's loader and the TypeScript it compiles on the fly stay in
 * memory. Read after the process has settled for a few seconds.
 */
async function idleRss(ctx: BenchContext): Promise<Record<Runtime, Record<'api' | 'worker', number>>> {
  const result = {} as Record<Runtime, Record<'api' | 'worker', number>>;
  for (const runtime of ['compiled', 'tsx'] as const) {
    result[runtime] = { api: 0, worker: 0 };
    for (const role of ['api', 'worker'] as const) {
      const proc = await startPlatform(ctx.settings, role, { env: ctx.config.platformEnv, runtime });
      try {
        await sleep(5_000);
        result[runtime][role] = round(mb(rssBytes(proc.pid)));
      } finally {
        await proc.stop();
      }
    }
  }
  return result;
}
