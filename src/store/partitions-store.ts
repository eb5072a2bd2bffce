/**
 * Partition upkeep of the time-partitioned tables (partition_plan): making the partitions ahead of
 * need, listing them with their bounds, and dropping one whole, including what a run left half
 * done. Retention (src/ops/retention.ts) decides which; `migrate` drops leftovers before it runs.
 * Raw SQL with `:name` bindings: DDL and catalog reads are beyond the builder.
 */
import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import { backoffDelayMs } from '../domain/retry-policy.js';

export interface PartitionBounds {
  parent: string;
  name: string;
  /** Null: unbounded (the partition holding rows from before partitioning). */
  lower: string | null;
  upper: string | null;
  detachPending: boolean;
}

/**
 * Creates the partitions that cover [from, to) and are missing, those of the tables cut by day a
 * `dayPeriod` long (dayTablesPeriod); answers how many it made. One table per statement, each its
 * own transaction: holding a new day of events while creating one of attempts deadlocked with
 * admission, which updates its deliveries and then reads their events (docs/architecture.md,
 * "Data over time").
 */
export async function ensurePartitions(db: Knex, from: Date, to: Date, dayPeriod: 'day' | 'week', signal?: AbortSignal): Promise<number> {
  const tables: string[] = await db('partition_plan').orderBy('table_name').pluck('table_name');
  let made = 0;
  for (const table of tables) made += await ensureTablePartitions(db, table, from, to, dayPeriod, signal);
  return made;
}

/**
 * The function waits at most 200 ms for each lock and then gives way to the traffic holding it
 * (db/functions/ensure_time_partitions_v2.sql); each table is tried again with backoff, for up to
 * about a minute. So is a deadlock, which release 0.6.0's one-transaction function can still close
 * while a deploy rolls.
 */
const partitionLockBackoff = { baseDelayMs: 50, maxDelayMs: 2_000 };
const partitionLockAttempts = 30;

async function ensureTablePartitions(db: Knex, table: string, from: Date, to: Date, dayPeriod: 'day' | 'week', signal: AbortSignal | undefined): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    try {
      const { rows } = await db.raw<{ rows: Array<{ made: number }> }>('SELECT ensure_time_partitions_v2(:table, :from, :to, :dayPeriod) AS made', { table, from, to, dayPeriod });
      return rows[0]?.made ?? 0;
    } catch (err) {
      if (!givenWay.has((err as { code?: string }).code ?? '') || attempt >= partitionLockAttempts) throw err;
      await sleep(backoffDelayMs(attempt, partitionLockBackoff, Math.random), undefined, { signal });
    }
  }
}

/** lock_not_available (the function's lock_timeout) and deadlock_detected. */
const givenWay = new Set(['55P03', '40P01']);

export async function listPartitions(db: Knex): Promise<PartitionBounds[]> {
  const { rows } = await db.raw<{ rows: Array<{ parent: string; name: string; lower_bound: string | null; upper_bound: string | null; detach_pending: boolean }> }>(
    'SELECT parent, name, lower_bound, upper_bound, detach_pending FROM partition_bounds ORDER BY parent, upper_bound COLLATE "C" NULLS LAST',
  );
  return rows.map((r) => ({ parent: r.parent, name: r.name, lower: r.lower_bound, upper: r.upper_bound, detachPending: r.detach_pending }));
}

/**
 * Rows in a partition about to be dropped. Exact while the partition is small; past a million rows
 * the planner's estimate (kept by autovacuum's ANALYZE), since counting a partition's rows exactly
 * would cost more than dropping them.
 */
export async function partitionRows(db: Knex, name: string): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ estimate: number }> }>('SELECT reltuples::float8 AS estimate FROM pg_class WHERE oid = :name::regclass', { name });
  const estimate = rows[0]?.estimate ?? -1;
  if (estimate > 1_000_000) return Math.round(estimate);
  const [counted] = await db(name).count({ n: '*' });
  return Number(counted!.n);
}

/**
 * Detaches a partition without blocking writers of its table (CONCURRENTLY), then drops it. A detach
 * that an earlier run left half done (the process died between its two transactions) is finished.
 */
export async function detachAndDrop(db: Knex, p: PartitionBounds): Promise<void> {
  // Raw: the builder writes no DDL.
  const names = { parent: p.parent, child: p.name };
  await db.raw(p.detachPending ? 'ALTER TABLE :parent: DETACH PARTITION :child: FINALIZE' : 'ALTER TABLE :parent: DETACH PARTITION :child: CONCURRENTLY', names);
  await dropDetached(db, p.name);
}

/**
 * Drops a table that is no longer a partition. A detached partition keeps its foreign keys as its
 * own (attempts → deliveries), and dropping a table with one locks the referenced table ACCESS
 * EXCLUSIVE until commit, and the commit is where the files are removed (~0.5 ms per MB here): every
 * read and write of deliveries would wait for the disk. Each key is dropped in a short transaction
 * of its own first, so the table's drop holds no lock but its own. A key to a partitioned table
 * (receipts → events) has one row per referenced partition under its own: dropping it drops those.
 */
async function dropDetached(db: Knex, name: string): Promise<void> {
  const { rows } = await db.raw<{ rows: Array<{ conname: string }> }>(
    "SELECT conname FROM pg_constraint WHERE conrelid = :name::regclass AND contype = 'f' AND conparentid = 0 ORDER BY conname",
    { name },
  );
  for (const { conname } of rows) await db.raw('ALTER TABLE :name: DROP CONSTRAINT :conname:', { name, conname });
  await db.raw('DROP TABLE :name:', { name });
}

/**
 * Where a time-partitioned table's key starts for rows made at or after `at`, as its partitions'
 * bounds are written: partition_floor, by the table's row of partition_plan.
 */
export async function partitionFloor(db: Knex, table: 'events' | 'receipts' | 'attempts' | 'audit_log', at: Date): Promise<string> {
  const { rows } = await db.raw<{ rows: Array<{ floor: string }> }>(
    'SELECT partition_floor(p, :at::timestamptz) AS floor FROM partition_plan p WHERE p.table_name = :table',
    { at, table },
  );
  if (!rows[0]) throw new Error(`partition_plan has no row for ${table}`);
  return rows[0].floor;
}

/**
 * Drops partitions a run detached but did not get to drop (the process died between the two): no
 * longer attached to their table, they would otherwise stay on disk for ever. Answers their names.
 */
export async function dropDetachedLeftovers(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ name: string }> }>(
    `SELECT c.relname AS name FROM pg_class c
      WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
        AND c.relname ~ ('^(' || (SELECT string_agg(table_name, '|') FROM partition_plan) || ')_p[0-9]{6,8}$')
        AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)`,
  );
  const dropped: string[] = [];
  for (const { name } of rows) {
    try {
      await dropDetached(db, name);
      dropped.push(name);
    } catch (err) {
      // Dropped meanwhile by another process doing the same (a migrator beside a retention run).
      if ((err as { code?: string }).code !== '42P01') throw err;
    }
  }
  return dropped;
}

/**
 * Before migrations run (`migrate`, `migrate:down`): what a retention run detached and did not get
 * to drop keeps its own foreign key to `deliveries` and the key type it was cut with, which a
 * migration that changes that type (20261206000053, and back) cannot convert. Retention's next run
 * would drop it anyway. Nothing on a database that is not partitioned yet.
 */
export async function dropDetachedLeftoversBeforeMigrating(db: Knex): Promise<string[]> {
  return (await db.schema.hasTable('partition_plan')) ? dropDetachedLeftovers(db) : [];
}
