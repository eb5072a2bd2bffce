/**
 * The SQL of retention's row removals (see src/ops/retention.ts for the order in which it runs;
 * whole partitions are ./partitions-store.ts's): rows leave in short batches, each its own
 * transaction, so nothing holds locks on the hot tables for long. Also what decides a removal (the
 * windows by PostgreSQL's clock, the events watermark) and the advisory locks that order it.
 * Unscoped: retention is the platform's own job, over every tenant. Mostly raw SQL with `:name`
 * bindings: batched deletes are beyond the builder, and the `removable` rule is one text shared by
 * every statement that needs it.
 */
import type { Knex } from 'knex';
import { idOfUuid, lowestStoredId } from '../domain/ids.js';
import { advisoryLocks } from '../infra/advisory-locks.js';
import type { Cutoffs, RetentionPolicy } from '../domain/retention.js';
import { TenantScope } from './tenant-scope.js';

/** The connection that holds a session-level advisory lock, for further locks held beside it. */
export interface LockSession {
  /**
   * Waits for the session-level advisory lock `key` on this connection (at most `holdWaitMs`, then
   * throws), runs `work`, releases it.
   */
  hold<T>(key: number, work: () => Promise<T>): Promise<T>;
}

/**
 * The server stops waiting for a held lock first, before the client's query_timeout (twice the
 * pool's timeout, 10 s): a lock the client gave up on but the server granted later would stay held
 * by an idle pooled connection.
 */
const holdWaitMs = 5_000;

/**
 * Runs `work` while holding the session-level advisory lock `key`; answers undefined at once when
 * another session holds it. Raw pg client: a session lock must be taken and released on the same
 * connection, which a query through knex's pool does not promise. `work` may hold further locks on
 * that connection (LockSession), so they take none of the pool's other connections.
 */
export async function withAdvisoryLock<T>(db: Knex, key: number, work: (session: LockSession) => Promise<T>): Promise<T | undefined> {
  const conn = await db.client.acquireConnection();
  const session: LockSession = {
    async hold(other, inner) {
      await conn.query(`SET lock_timeout = ${holdWaitMs}`);
      try {
        await conn.query('SELECT pg_advisory_lock($1)', [other]);
      } finally {
        await conn.query('RESET lock_timeout');
      }
      try {
        return await inner();
      } finally {
        await conn.query('SELECT pg_advisory_unlock($1)', [other]);
      }
    },
  };
  try {
    const locked = await conn.query('SELECT pg_try_advisory_lock($1) AS ok', [key]);
    if (!locked.rows[0].ok) return undefined;
    try {
      return await work(session);
    } finally {
      await conn.query('SELECT pg_advisory_unlock($1)', [key]);
    }
  } finally {
    await db.client.releaseConnection(conn);
  }
}

/**
 * Held by retention, exclusively, from its check that no kept delivery points into a partition of
 * events until the events watermark has risen past it; held shared by every transaction that writes
 * deliveries of past events (a backfill), from before it reads the watermark and then only events
 * from it on (eventsKeptFromId). `deliveries.event_id` has no foreign key (migration
 * 20261205000049): without this, a backfill that committed between the check and the drop would
 * leave deliveries whose event is gone. Publishing and intake write deliveries of today's events
 * only, which retention never drops.
 */
export const eventDaysLock = advisoryLocks.eventDays;

/**
 * PostgreSQL's clock, and where each retention window begins by it (db/functions/retention_cutoff.sql,
 * the rule a replay's window check asks too), so that a process whose clock runs ahead does not
 * remove what a replay still takes.
 */
export async function databaseCutoffs(db: Knex, policy: RetentionPolicy): Promise<{ now: Date; cut: Cutoffs }> {
  const { rows } = await db.raw<{ rows: Array<{ now: Date } & Cutoffs> }>(
    'SELECT now() AS now, retention_cutoff(:succeeded) AS succeeded, retention_cutoff(:dead) AS dead, retention_cutoff(:audit) AS audit',
    { succeeded: policy.retentionDays, dead: policy.deadLetterRetentionDays, audit: policy.auditRetentionDays },
  );
  const { now, succeeded, dead, audit } = rows[0]!;
  return { now, cut: { succeeded, dead, audit } };
}

/** A finished delivery whose window has passed: the only kind retention removes. */
const removable = `((d.status = 'succeeded' AND d.updated_at < :succeeded) OR (d.status = 'dead' AND d.updated_at < :dead))`;


/** True when every delivery with an id in [lower, upper) is removable (or there are none). */
export async function deliveriesAllRemovable(db: Knex, { lower, upper }: IdRange, cut: Cutoffs): Promise<boolean> {
  const { rows } = await db.raw<{ rows: unknown[] }>(
    `SELECT 1 FROM deliveries d WHERE d.id >= :lower AND d.id < :upper AND NOT ${removable} LIMIT 1`,
    { lower: lower ?? lowestStoredId, upper, succeeded: cut.succeeded, dead: cut.dead },
  );
  return rows.length === 0;
}

/** Ids in [lower, upper); a null lower is unbounded. */
export interface IdRange {
  lower: string | null;
  upper: string;
}

/** A removal in batches, each its own transaction; an aborted signal ends it before the next, answering what it removed. */
export interface BatchOptions {
  dryRun: boolean;
  batch: number;
  signal?: AbortSignal;
}

/** Rows removed from deliveries, and attempts that went with them (ON DELETE CASCADE, or folded in). */
export interface RemovedDeliveries {
  deliveries: number;
  attempts: number;
}

/**
 * Removes (or, dry, counts) removable deliveries in batches: those with an id in a range, or with an
 * event older than `eventsBefore` outside the ranges already handled. Their attempts go with them
 * (ON DELETE CASCADE), which costs nothing where the attempts' partition was dropped first.
 */
export async function removeDeliveries(
  db: Knex,
  where: { ids: IdRange } | { eventsBefore: string; excluding: IdRange[] },
  cut: Cutoffs,
  opts: BatchOptions,
): Promise<RemovedDeliveries> {
  const bindings: Record<string, Knex.Value> = { succeeded: cut.succeeded, dead: cut.dead, batch: opts.batch };
  let range: string;
  if ('ids' in where) {
    range = 'd.id >= :lower AND d.id < :upper';
    Object.assign(bindings, { lower: where.ids.lower ?? lowestStoredId, upper: where.ids.upper });
  } else {
    range = 'd.event_id < :eventsBefore';
    bindings.eventsBefore = where.eventsBefore;
    where.excluding.forEach((r, i) => {
      range += ` AND NOT (d.id >= :lo${i} AND d.id < :hi${i})`;
      Object.assign(bindings, { [`lo${i}`]: r.lower ?? lowestStoredId, [`hi${i}`]: r.upper });
    });
  }
  // The attempts are counted in the statement's snapshot, taken before the cascade removes them;
  // a first try folded into its delivery (db/functions/delivery_attempts.sql) goes with it.
  const counted = `SELECT count(*)::int AS deliveries, (SELECT count(*)::int FROM chosen c CROSS JOIN LATERAL delivery_attempts(c.id) a) AS attempts FROM chosen`;
  if (opts.dryRun) {
    const { rows } = await db.raw<{ rows: RemovedDeliveries[] }>(`WITH chosen AS (SELECT d.id FROM deliveries d WHERE ${range} AND ${removable}) ${counted}`, bindings);
    return rows[0]!;
  }
  const total: RemovedDeliveries = { deliveries: 0, attempts: 0 };
  while (!opts.signal?.aborted) {
    const { rows } = await db.raw<{ rows: RemovedDeliveries[] }>(
      `WITH chosen AS (DELETE FROM deliveries WHERE id IN (SELECT d.id FROM deliveries d WHERE ${range} AND ${removable} LIMIT :batch) RETURNING id)
       ${counted}`,
      bindings,
    );
    total.deliveries += rows[0]!.deliveries;
    total.attempts += rows[0]!.attempts;
    if (rows[0]!.deliveries < opts.batch) break;
  }
  return total;
}

/**
 * True when a delivery still points at an event in [lower, upper), so that partition of events must
 * stay. `unremovableOnly`: count only deliveries retention would keep (a dry run has deleted nothing).
 */
export async function deliveriesReferenceEvents(db: Knex, { lower, upper }: IdRange, cut: Cutoffs, unremovableOnly: boolean): Promise<boolean> {
  const kept = unremovableOnly ? `AND NOT ${removable}` : '';
  const { rows } = await db.raw<{ rows: unknown[] }>(
    `SELECT 1 FROM deliveries d WHERE d.event_id >= :lower AND d.event_id < :upper ${kept} LIMIT 1`,
    { lower: lower ?? lowestStoredId, upper, succeeded: cut.succeeded, dead: cut.dead },
  );
  return rows.length > 0;
}

/**
 * Removes (or counts) the keys of the events in one partition: a key lives as long as its event.
 * In batches of the partition's keyed events, in id order, each its own transaction: a week's
 * partition holds seven days of keys.
 */
export async function removeEventKeys(db: Knex, partition: string, opts: Pick<BatchOptions, 'dryRun' | 'batch'>): Promise<number> {
  // Raw: the builder has no DELETE ... USING a subquery, nor a join on a row of columns. A key's
  // scope is its source, else its tenant as its uuid's text (db/functions/publish_events.sql).
  const keyed = `SELECT coalesce(e.source_id, e.tenant_id::text) AS scope_id, coalesce(e.dedupe_key, e.idempotency_key) AS key, e.id
                   FROM :partition: e WHERE (e.dedupe_key IS NOT NULL OR e.idempotency_key IS NOT NULL)`;
  if (opts.dryRun) {
    const { rows } = await db.raw<{ rows: Array<{ n: string }> }>(
      `SELECT count(*) AS n FROM event_keys k JOIN (${keyed}) e ON (k.scope_id, k.key, k.event_id) = (e.scope_id, e.key, e.id)`,
      { partition },
    );
    return Number(rows[0]!.n);
  }
  let removed = 0;
  let after = lowestStoredId;
  for (;;) {
    const { rows } = await db.raw<{ rows: Array<{ last: string | null; events: number; keys: number }> }>(
      `WITH chosen AS (${keyed} AND e.id > :after ORDER BY e.id LIMIT :batch),
            gone AS (DELETE FROM event_keys k USING chosen e WHERE (k.scope_id, k.key, k.event_id) = (e.scope_id, e.key, e.id) RETURNING 1)
       SELECT (SELECT id FROM chosen ORDER BY id DESC LIMIT 1) AS last, (SELECT count(*) FROM chosen)::int AS events, (SELECT count(*) FROM gone)::int AS keys`,
      { partition, after, batch: opts.batch },
    );
    removed += rows[0]!.keys;
    if (rows[0]!.events < opts.batch) return removed;
    after = rows[0]!.last!;
  }
}

/** Removes (or counts) rows of a small or by-age table in batches: messages, replays. */
export async function removeOlderThan(
  db: Knex,
  table: 'messages' | 'replays',
  column: 'updated_at' | 'created_at',
  before: Date,
  opts: BatchOptions,
): Promise<number> {
  if (opts.dryRun) {
    const [counted] = await db(table).where(column, '<', before).count({ n: '*' });
    return Number(counted!.n);
  }
  let removed = 0;
  while (!opts.signal?.aborted) {
    // Raw: the builder cannot delete a batch by ctid.
    const r = await db.raw<{ rowCount: number }>(
      'DELETE FROM :table: WHERE ctid = ANY (ARRAY(SELECT ctid FROM :table: WHERE :column: < :before LIMIT :batch))',
      { table, column, before, batch: opts.batch },
    );
    removed += r.rowCount;
    if (r.rowCount < opts.batch) break;
  }
  return removed;
}

/**
 * Records that rows of `table` made before `before` are removed, or being removed by the run that
 * raised it: nothing may read them to make new rows (never moves back).
 */
export async function raiseWatermark(db: Knex, table: string, before: Date): Promise<void> {
  await db('retention_watermarks')
    .insert({ table_name: table, removed_before: before })
    .onConflict('table_name')
    .merge({ removed_before: db.raw('greatest(retention_watermarks.removed_before, EXCLUDED.removed_before)') });
}

/** Up to when rows of `table` have been removed, if ever: from a tenant's scope, or unscoped (retention). */
export async function watermark(from: TenantScope | Knex, table: string): Promise<Date | undefined> {
  const rows = from instanceof TenantScope ? from.shared('retention_watermarks') : from('retention_watermarks');
  const row: { removed_before: Date } | undefined = await rows.where({ table_name: table }).first('removed_before');
  return row?.removed_before;
}

/**
 * Removes (or, dry, counts) unfinished deliveries whose event retention has removed: none can be
 * sent, replayed or shown with its event, and admission, which reads the event with the delivery,
 * picks one in every round without sending it until the sweep dead-letters it at its deadline
 * (docs/operations/upgrade.md). Only a backfill racing a retention run of the other release, while
 * a deploy from 0.5.0 rolls, leaves one. Candidates are deliveries of events below the watermark
 * (`keptFrom`, bound so that the planner walks deliveries_event_endpoint for them) that are still
 * in the queue. Answers their ids, as TypeIDs.
 */
export async function removeOrphanedDeliveries(db: Knex, keptFrom: string, dryRun: boolean): Promise<string[]> {
  const orphaned = `SELECT d.id FROM deliveries d
                     WHERE d.event_id < :keptFrom
                       AND EXISTS (SELECT 1 FROM delivery_queue q WHERE q.delivery_id = d.id)
                       AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)`;
  const { rows } = await db.raw<{ rows: Array<{ id: string }> }>(
    dryRun ? orphaned : `DELETE FROM deliveries WHERE id IN (${orphaned}) RETURNING id`,
    { keptFrom },
  );
  return rows.map((r) => idOfUuid('delivery', r.id));
}
