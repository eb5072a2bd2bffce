import { uuidOf } from '../../src/domain/ids.js';
import { resetState, type BenchContext } from '../lib/context.js';
import { insertEndpoints, insertTenant } from '../lib/database.js';
import { uuidFloor } from '../../src/domain/retention.js';
import { detachAndDrop, ensurePartitions, listPartitions } from '../../src/store/partitions-store.js';
import { median, round } from '../lib/stats.js';

export interface RetentionResult {
  dropMsPerMillion: number;
  deleteMsPerMillion: number;
  details: Record<string, unknown>;
}

const dayMs = 86_400_000;
const deliveriesPerDay = 1_000;
const chunk = 100_000;

/**
 * Removing attempt rows: the same number of rows (BENCH_RETENTION_ROWS) in two back-dated days of
 * attempts, one removed the way retention does it (DETACH CONCURRENTLY + DROP of its partition), the
 * other by DELETE of exactly those rows, the way it would be without partitions; each reported per
 * million rows, each from a checkpoint, the drop first so that the DELETE's writeback is not in its
 * way. The DELETE leaves dead rows that VACUUM must still visit: its time is in the details.
 *
 * A single pair read anywhere from 7× to 12× on one quiet host within an hour (docs/performance.md,
 * "A full run on a quiet host"), so BENCH_RETENTION_PAIRS pairs run, each on days of its own, and
 * each side is their median.
 */
export async function runRetention(ctx: BenchContext): Promise<RetentionResult> {
  const { rows, pairs: count } = ctx.config.retention;
  await resetState(ctx);
  const tenantId = await insertTenant(ctx.db, 'retention');
  const [endpointId] = await insertEndpoints(ctx.db, tenantId, 'ret', 1, 1, ctx.settings.secretsKey);
  const pairs: RemovalPair[] = [];
  // One base for every pair: a run that crosses midnight must not give two pairs the same day.
  const today = Math.floor(Date.now() / dayMs) * dayMs;
  for (let pair = 0; pair < count; pair++) pairs.push(await removalPair(ctx, tenantId, endpointId!, new Date(today - (60 + 2 * pair) * dayMs)));
  const perMillion = (ms: number) => round((ms * 1_000_000) / rows, 1);
  return {
    dropMsPerMillion: perMillion(median(pairs.map((p) => p.dropMs))),
    deleteMsPerMillion: perMillion(median(pairs.map((p) => p.deleteMs))),
    details: { rows, pairs },
  };
}

interface RemovalPair {
  dropMs: number;
  deleteMs: number;
  vacuumAfterDeleteMs: number;
}

/** Two days from `first`: the first is removed by DELETE, the second by dropping its partition. */
async function removalPair(ctx: BenchContext, tenantId: string, endpointId: string, first: Date): Promise<RemovalPair> {
  const { rows } = ctx.config.retention;
  const { db } = ctx;
  const days = [first, new Date(first.getTime() + dayMs)];
  await ensurePartitions(db, days[0]!, new Date(days[1]!.getTime() + dayMs), 'day');
  const perDelivery = Math.ceil(rows / deliveriesPerDay);
  for (const day of days) {
    // One event per delivery (deliveries are unique per event and endpoint), ids 1 ms apart in the day.
    await db.raw(
      `INSERT INTO events (id, tenant_id, origin, type, data, created_at)
       SELECT uuid_floor(:day::timestamptz + make_interval(secs => n / 1000.0)), :tenant, 'api', 'bench.retention', '{}', :day
         FROM generate_series(1, :count) n`,
      { day, tenant: uuidOf('tenant', tenantId), count: deliveriesPerDay },
    );
    await db.raw(
      `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, deadline_at, created_at, updated_at, succeeded_at)
       SELECT uuid_floor(at), :tenant, uuid_floor(at), :endpoint, 'succeeded', :day, :day, :day, :day
         FROM generate_series(1, :count) n, LATERAL (SELECT :day::timestamptz + make_interval(secs => n / 1000.0) AS at) t`,
      { day, tenant: uuidOf('tenant', tenantId), endpoint: uuidOf('endpoint', endpointId), count: deliveriesPerDay },
    );
    ctx.log(`retention: ${rows.toLocaleString('en-US')} attempt rows dated ${day.toISOString().slice(0, 10)}`);
    // In chunks: each statement stays well inside the bench connection's query timeout.
    for (let from = 0; from < rows; from += chunk) {
      await db.raw(
        `INSERT INTO attempts (id, delivery_id, attempt_number, trigger, started_at, duration_ms, status_code, outcome)
         SELECT gen_random_uuid(), uuid_floor(:day::timestamptz + make_interval(secs => (1 + n / :per) / 1000.0)),
                1 + n % :per, array_position(attempt_triggers(), 'retry'), :day, 12, 503, array_position(attempt_outcomes(), 'retry')
           FROM generate_series(:from::int, :to::int) n`,
        { day, per: perDelivery, from, to: Math.min(rows, from + chunk) - 1 },
      );
    }
  }
  const partitions = (await listPartitions(db)).filter((p) => p.parent === 'attempts');
  const [deleted, dropped] = days.map((d) => partitions.find((p) => p.lower === uuidFloor(d))!);
  if (!deleted || !dropped) throw new Error('retention: the back-dated attempts partitions are missing');
  // A day retention removes is weeks old: vacuumed (hint bits and visibility map set) and on disk.
  // The rows just written are neither: without this, the first timed step would pay for their
  // hint bits and their writeback (a DROP's file truncation waits for pages still being written).
  const settle = async (names: string[]) => {
    await db.raw(`VACUUM (ANALYZE) ${names.map((n) => db.client.wrapIdentifier(n)).join(', ')}`);
    await db.raw('CHECKPOINT');
  };

  await settle([deleted.name, dropped.name]);
  const t2 = performance.now();
  await detachAndDrop(db, dropped);
  const dropMs = performance.now() - t2;
  await settle([deleted.name]);
  const t0 = performance.now();
  const del = await db.raw<{ rowCount: number }>('DELETE FROM attempts WHERE delivery_id >= ? AND delivery_id < ?', [deleted.lower, deleted.upper]);
  const deleteMs = performance.now() - t0;
  const t1 = performance.now();
  await db.raw(`VACUUM ${db.client.wrapIdentifier(deleted.name)}`);
  const vacuumMs = performance.now() - t1;
  if (del.rowCount !== rows) throw new Error(`retention: DELETE removed ${del.rowCount} rows, expected ${rows}`);
  ctx.log(`retention: drop ${round(dropMs, 1)} ms, DELETE ${round(deleteMs, 1)} ms`);
  return { dropMs: round(dropMs, 1), deleteMs: round(deleteMs, 1), vacuumAfterDeleteMs: round(vacuumMs, 1) };
}
