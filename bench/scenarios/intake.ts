import { createFilteredEndpoints, createTenant } from '../lib/api.js';
import { freePort, repoRoot, spawnTs, waitForHttp } from '../lib/children.js';
import { resetState, startMeasured, type BenchContext } from '../lib/context.js';
import { countRows } from '../lib/database.js';
import { closedLoop, paced, p99 } from '../lib/load.js';
import { signedCallback, signedCallbacks, type PreparedRequest, type SignedSource } from '../lib/payload.js';
import { percentile, round } from '../lib/stats.js';
import { CpuBudget, cpuBoundRatio, perUnitMs } from '../lib/cpu-budget.js';
import { PgSampler } from '../lib/pg-sampler.js';
import { StallSampler, stallReport } from '../lib/stall-sampler.js';
import { pgCounters, perUnit } from '../lib/pg-stats.js';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export interface IntakeResult {
  rps: number;
  floorRps: number;
  ratio: number;
  p99MsHalfLoad: number;
  /** Maximum rate once every tenant also has `filteredEndpoints` endpoints with a content filter, over the rate without. */
  filteredRatio: number;
  details: Record<string, unknown>;
}

/**
 * The filter of intake.filteredRatio's endpoints: a big-integer comparison and a list, over fields
 * the bench's payloads lack, so fan-out parses every event and evaluates every filter, and no
 * filtered endpoint gets a delivery (the row counts below stay two per event).
 */
const benchFilter = '{"data.amount": {"$gte": 12345678901234567890}, "data.country": {"$in": ["VN", "TH"]}}';

/**
 * Hands out pre-generated signed callbacks (distinct event ids), so signing costs the load
 * generator nothing during the measurement. If the pool runs dry, more are signed on the fly and
 * counted, which would show up in the details.
 */
class Feed {
  private index = 0;
  private pool: PreparedRequest[];
  lateSigned = 0;

  constructor(
    private readonly sources: SignedSource[],
    size: number,
    private readonly payloadBytes: number,
    private readonly offset: number,
  ) {
    this.pool = signedCallbacks(sources, size, payloadBytes, offset);
  }

  next = (): PreparedRequest => {
    const i = this.index++;
    const ready = this.pool[i];
    if (ready) return ready;
    this.lateSigned++;
    return signedCallback(this.sources[i % this.sources.length]!, this.offset + i, this.payloadBytes);
  };
}

/**
 * Intake: signed momo-automation callbacks with distinct event ids, round-robin over one source per
 * tenant, each tenant with 2 endpoints, through the full path (verify, dedupe, store, fan-out).
 * The platform runs as role `api` only, so dispatch does not compete for the 2 cores; the
 * deliveries stay pending and are counted at the end as proof that fan-out happened.
 */
export async function runIntake(ctx: BenchContext): Promise<IntakeResult> {
  const { intake: cfg, payloadBytes } = ctx.config;
  await resetState(ctx);
  // WAL sync times in pg_stat_wal are only counted with this on; set before the platform connects.
  if (ctx.config.stallSample) await ctx.db.raw(`ALTER DATABASE ${new URL(ctx.settings.databaseUrl).pathname.slice(1)} SET track_wal_io_timing = on`);
  const api = await startMeasured(ctx, 'api', 'intake-api');
  let max;
  let stalls: ReturnType<typeof stallReport> | undefined;
  let half;
  let warm;
  let filteredWarm;
  let filtered;
  let lateSigned = 0;
  let cpu: Record<string, number>;
  let perCallback: Record<string, number>;
  let pgActivity: ReturnType<PgSampler['stop']> | undefined;
  try {
    const sources: SignedSource[] = [];
    const apiKeys: string[] = [];
    for (let t = 0; t < cfg.tenants; t++) {
      const tenant = await createTenant(api, ctx.settings.adminToken, {
        name: `intake-${t}`,
        endpointUrls: [ctx.receiver.okUrl(0, `t${t}/a`), ctx.receiver.okUrl(1, `t${t}/b`)],
        source: true,
      });
      sources.push(tenant.source!);
      apiKeys.push(tenant.apiKey);
    }
    // Generous pools: 6,000 callbacks per second of run time outruns what 2 cores can take.
    const warmFeed = new Feed(sources, 6_000 * cfg.warmupSeconds, payloadBytes, 0);
    ctx.log(`intake: warm-up ${cfg.warmupSeconds}s at ${cfg.connections} connections`);
    warm = await closedLoop(api.url, warmFeed.next, cfg.connections, cfg.warmupSeconds);
    const maxFeed = new Feed(sources, 6_000 * cfg.seconds, payloadBytes, 1_000_000);
    ctx.log(`intake: maximum rate for ${cfg.seconds}s`);
    await sleep(1_100); // lets PostgreSQL publish the warm-up's counters before the snapshot
    const pgBefore = await pgCounters(ctx.db);
    const budget = new CpuBudget(ctx.db, { api: [api.pid], loadGenerator: [process.pid] });
    const pgSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
    pgSampler?.start();
    await budget.start();
    max = await closedLoop(api.url, maxFeed.next, cfg.connections, cfg.seconds);
    cpu = await budget.stop();
    pgActivity = pgSampler?.stop();
    await sleep(1_100);
    perCallback = perUnit(pgBefore, await pgCounters(ctx.db), max.ok);
    const rate = Math.max(1, Math.floor(max.rps / 2));
    const halfFeed = new Feed(sources, Math.ceil(rate * cfg.halfLoadSeconds) + 10, payloadBytes, 2_000_000);
    ctx.log(`intake: ${rate}/s (half of ${Math.round(max.rps)}/s) for ${cfg.halfLoadSeconds}s`);
    const stallSampler = ctx.config.stallSample ? new StallSampler(ctx.settings.databaseUrl, join(repoRoot, 'bench', 'results', 'disk-probe.tmp')) : undefined;
    await stallSampler?.start();
    half = await paced(api.url, halfFeed.next, { rate, seconds: cfg.halfLoadSeconds, connections: cfg.connections });
    if (stallSampler) {
      const timeline = await stallSampler.stop();
      const { startedAt, latenciesMs } = half;
      stalls = stallReport(timeline, latenciesMs.map((ms, i) => ({ at: startedAt + (i * 1000) / rate, ms })));
      ctx.log(`intake: ${stalls.episodes.length} slow spans (> ${stalls.slowMs} ms) at half load; disk probe fsync p99 ${stalls.diskProbe.p99Ms} ms, max ${stalls.diskProbe.maxMs} ms`);
    }
    ctx.log(`intake: ${cfg.filteredEndpoints} filtered endpoints per tenant, then the maximum rate again`);
    for (const [t, apiKey] of apiKeys.entries()) {
      const urls = Array.from({ length: cfg.filteredEndpoints }, (_, i) => ctx.receiver.okUrl(2, `t${t}/f${i}`));
      await createFilteredEndpoints(api, apiKey, urls, benchFilter);
    }
    const filteredWarmFeed = new Feed(sources, 6_000 * cfg.warmupSeconds, payloadBytes, 3_000_000);
    filteredWarm = await closedLoop(api.url, filteredWarmFeed.next, cfg.connections, cfg.warmupSeconds);
    const filteredFeed = new Feed(sources, 6_000 * cfg.seconds, payloadBytes, 4_000_000);
    filtered = await closedLoop(api.url, filteredFeed.next, cfg.connections, cfg.seconds);
    lateSigned = warmFeed.lateSigned + maxFeed.lateSigned + halfFeed.lateSigned + filteredWarmFeed.lateSigned + filteredFeed.lateSigned;
  } finally {
    await api.stop();
  }

  // Every 2xx was a distinct callback: it must be one accepted receipt, one event and two pending
  // deliveries, or the number above measured something other than the full path. autocannon drops
  // the requests still in flight when its time is up (at most one per connection per run); the
  // platform may still have committed those, so they may add to the rows but never be missing.
  const answered = warm.ok + max.ok + half.ok + filteredWarm.ok + filtered.ok;
  const unanswered = 4 * cfg.connections;
  const events = await countRows(ctx.db, "SELECT count(*) AS n FROM events WHERE origin = 'callback'");
  const receipts = await countRows(ctx.db, "SELECT count(*) AS n FROM receipts WHERE outcome = 'accepted'");
  const deliveries = await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'pending'");
  const within = (n: number, per: number) => n >= per * answered && n <= per * (answered + unanswered);
  if (!within(events, 1) || receipts !== events || !within(deliveries, 2) || deliveries !== 2 * events) {
    throw new Error(`intake: ${answered} callbacks answered 2xx but the database holds ${events} events, ${receipts} accepted receipts, ${deliveries} pending deliveries`);
  }

  const floor = await runIntakeFloor(ctx, signedCallbacks([{ id: 'x', secret: 'x', subscription: 'x' }], 1, payloadBytes)[0]!.body);
  const halfLatencies = half.latenciesMs;
  return {
    rps: round(max.rps),
    floorRps: round(floor.rps),
    ratio: round(max.rps / floor.rps, 3),
    p99MsHalfLoad: round(p99(halfLatencies), 2),
    filteredRatio: round(filtered.rps / max.rps, 3),
    details: {
      connections: cfg.connections,
      seconds: cfg.seconds,
      cpuMsPerCallback: perUnitMs(cpu, max.ok),
      // The floor's express + one INSERT (and load generator) against the api, PostgreSQL and load generator per callback.
      cpuBoundRatio: cpuBoundRatio(perUnitMs(cpu, max.ok), floor.cpuMsPerRequest),
      postgresPerCallback: perCallback,
      max: { ok: max.ok, failed: max.failed, statusCodes: max.statusCodes, p50Ms: max.p50Ms, p99Ms: max.p99Ms },
      halfLoad: {
        rate: Math.floor(max.rps / 2),
        achievedRate: round(half.achievedRate),
        ok: half.ok,
        failed: half.failed,
        p50Ms: round(percentile(halfLatencies, 50), 2),
        p90Ms: round(percentile(halfLatencies, 90), 2),
        p99Ms: round(p99(halfLatencies), 2),
        maxMs: round(Math.max(...halfLatencies), 2),
      },
      filtered: { endpointsPerTenant: cfg.filteredEndpoints, filter: benchFilter, rps: round(filtered.rps), ok: filtered.ok, failed: filtered.failed, p50Ms: filtered.p50Ms, p99Ms: filtered.p99Ms },
      floor,
      ...(pgActivity && { pgActivity }),
      ...(stalls && { stalls }),
      verified: { events, acceptedReceipts: receipts, pendingDeliveries: deliveries },
      lateSigned,
    },
  };
}

/** The floor: floor-intake-process.ts, same connections, same duration, same body size. */
async function runIntakeFloor(ctx: BenchContext, body: string) {
  const { intake: cfg } = ctx.config;
  const port = await freePort();
  const child = spawnTs('intake floor', 'bench/lib/floor-intake-process.ts', [String(port), ctx.settings.databaseUrl]);
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitForHttp(child, `${url}/healthz`);
    const request: PreparedRequest = { path: '/floor', headers: { 'content-type': 'application/json' }, body };
    const next = () => request;
    ctx.log(`intake floor: warm-up ${cfg.warmupSeconds}s, then ${cfg.seconds}s`);
    await closedLoop(url, next, cfg.connections, cfg.warmupSeconds);
    const budget = new CpuBudget(ctx.db, { floor: [child.pid], loadGenerator: [process.pid] });
    await budget.start();
    const result = await closedLoop(url, next, cfg.connections, cfg.seconds);
    const cpu = await budget.stop();
    return { rps: result.rps, ok: result.ok, failed: result.failed, p50Ms: result.p50Ms, p99Ms: result.p99Ms, cpuMsPerRequest: perUnitMs(cpu, result.ok) };
  } finally {
    await child.stop();
  }
}
