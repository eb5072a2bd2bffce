import { randomUUID } from 'node:crypto';
import { createTenant } from '../lib/api.js';
import { CpuBudget } from '../lib/cpu-budget.js';
import { PgSampler } from '../lib/pg-sampler.js';
import { resetState, startMeasured, waitUntil, type BenchContext } from '../lib/context.js';
import { countRows } from '../lib/database.js';
import { sendList } from '../lib/load.js';
import { payloadData, type PreparedRequest } from '../lib/payload.js';
import { median, round } from '../lib/stats.js';
import { dayTablesPeriod, defaultRetention } from '../../src/domain/retention.js';
import { ensurePartitions } from '../../src/store/partitions-store.js';

export interface StorageResult {
  bytesPerEvent: number;
  /** CPU of the PostgreSQL backends serving the platform, per event (1 publish, 2 first-try deliveries). */
  cpuMsPerEvent: number;
  details: Record<string, unknown>;
}

/** Total size (heap, TOAST, every index) of each table, partitions counted under their parent. */
async function relationSizes(ctx: BenchContext): Promise<Map<string, number>> {
  const { rows } = await ctx.db.raw<{ rows: Array<{ name: string; bytes: string }> }>(`
    SELECT coalesce(parent.relname, c.relname) AS name, sum(pg_total_relation_size(c.oid))::bigint AS bytes
      FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
      LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
      LEFT JOIN pg_class parent ON parent.oid = i.inhparent
     WHERE c.relkind = 'r'
     GROUP BY 1`);
  return new Map(rows.map((r) => [r.name, Number(r.bytes)]));
}

/**
 * Storage per event: the growth of every table's total size (heap, TOAST, indexes) over N events
 * published through the API to 2 endpoints with a ~400-byte payload, each delivered on the first
 * try, divided by N. Measured once the last delivery is recorded, without VACUUM: what a live
 * database carries, dead row versions included, until autovacuum makes their space reusable.
 * Over the same window, the CPU of the database's client backends (/proc) per event: the
 * completion wait watches the receiver first, so the bench's own polling adds only a few queries.
 * Each field is the median of BENCH_STORAGE_PASSES passes, each from a fresh state, on a database
 * holding BENCH_STORAGE_PAST_DAYS days of partitions (by day, or by week from 56), as one that has run for RETENTION_DAYS does:
 * a statement that opens every partition of a table costs that many.
 */
export async function runStorage(ctx: BenchContext): Promise<StorageResult> {
  // One pass's CPU moved by a third between runs of the same tree on this host (docs/performance.md,
  // "Release 0.2.0, and attempts without their tenant"): the median of a few says more.
  const passes: StorageResult[] = [];
  for (let pass = 1; pass <= ctx.config.storage.passes; pass++) passes.push(await storagePass(ctx, pass));
  return {
    bytesPerEvent: median(passes.map((p) => p.bytesPerEvent)),
    cpuMsPerEvent: median(passes.map((p) => p.cpuMsPerEvent)),
    details: { passes: passes.map((p) => ({ bytesPerEvent: p.bytesPerEvent, cpuMsPerEvent: p.cpuMsPerEvent, ...p.details })) },
  };
}

async function storagePass(ctx: BenchContext, pass: number): Promise<StorageResult> {
  const { storage: cfg } = ctx.config;
  await resetState(ctx);
  const period = cfg.period ?? dayTablesPeriod({ ...defaultRetention, retentionDays: cfg.pastDays });
  // A month at a time: each partition made holds its locks until its transaction ends.
  for (let daysAgo = cfg.pastDays; daysAgo > 0; daysAgo -= 30) {
    await ensurePartitions(ctx.db, new Date(Date.now() - daysAgo * 86_400_000), new Date(Date.now() - Math.max(0, daysAgo - 30) * 86_400_000), period);
  }
  const eventPartitions = await countRows(ctx.db, "SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'events'::regclass");
  // The publish runs faster than the default tenant rate limit, which is not what this measures.
  const platform = await startMeasured(ctx, 'all', 'storage', { TENANT_RATE_LIMIT_PER_SECOND: '1000000' });
  try {
    const tenant = await createTenant(platform, ctx.settings.adminToken, {
      name: 'storage',
      endpointUrls: [ctx.receiver.okUrl(0, 'storage/a'), ctx.receiver.okUrl(1, 'storage/b')],
    });
    const request = (n: number): PreparedRequest => ({
      path: '/v1/events',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${tenant.apiKey}` },
      body: JSON.stringify({ type: 'order.created', data: { ...payloadData(n, cfg.payloadBytes), ref: randomUUID() } }),
    });
    const before = await relationSizes(ctx);
    ctx.log(`storage: ${cfg.events} events to 2 endpoints (pass ${pass} of ${cfg.passes})`);
    const requests = Array.from({ length: cfg.events }, (_, n) => request(n));
    const budget = new CpuBudget(ctx.db, {});
    await budget.start();
    const pgSampler = ctx.config.pgSample ? new PgSampler(ctx.db) : undefined;
    pgSampler?.start();
    const sent = await sendList(platform.url, requests, 20);
    if (sent.statusCodes['202'] !== cfg.events) throw new Error(`storage: publishing answered ${JSON.stringify(sent.statusCodes)}, expected ${cfg.events} × 202`);
    const expected = cfg.events * 2;
    await waitUntil(async () => (await ctx.receiver.okTotal(2)) >= expected, `${expected} requests at the receiver`, 120_000, 100);
    await waitUntil(
      async () => (await countRows(ctx.db, "SELECT count(*) AS n FROM deliveries WHERE status = 'succeeded'")) >= expected,
      `${expected} succeeded deliveries`,
      120_000,
      250,
    );
    const cpu = await budget.stop();
    const pgActivity = pgSampler?.stop(20);
    const firstTry = await countRows(ctx.db, 'SELECT count(*) AS n FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a');
    if (firstTry !== expected) throw new Error(`storage: expected every delivery to succeed on its first try, found ${firstTry} attempts for ${expected} deliveries`);
    const after = await relationSizes(ctx);
    const growth: Record<string, number> = {};
    let total = 0;
    for (const [name, bytes] of after) {
      const grew = bytes - (before.get(name) ?? 0);
      if (grew === 0) continue;
      growth[name] = round(grew / cfg.events, 1);
      total += grew;
    }
    return {
      bytesPerEvent: round(total / cfg.events, 0),
      cpuMsPerEvent: round((cpu.postgres! * 1000) / cfg.events, 3),
      details: { events: cfg.events, endpoints: 2, payloadBytes: cfg.payloadBytes, eventPartitions, bytesPerEventByTable: growth, postgresCpuSeconds: round(cpu.postgres!, 2), pgActivity },
    };
  } finally {
    await platform.stop();
  }
}
