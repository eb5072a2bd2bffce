import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Knex } from 'knex';
import { uuidOf } from '../../src/domain/ids.js';
import { pgAdminUrl, templateDatabase } from './global-setup.js';

/** The pid of the vitest run that owns the template (workers inherit it through the template name). */
function runPid(): number {
  return Number(/^whr_tpl_(\d+)$/.exec(templateDatabase)?.[1] ?? process.pid);
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: pgAdminUrl });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A private, already migrated database for one test file (or one test). */
export async function createTestDatabase(template = templateDatabase): Promise<TestDatabase> {
  // The run's pid in the name lets a later run drop it only once this run is gone.
  const name = `whr_t_${runPid()}_${randomBytes(5).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE "${name}" TEMPLATE "${template}"`));
  const url = new URL(pgAdminUrl);
  url.pathname = `/${name}`;
  return {
    name,
    url: url.toString(),
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)).then(() => undefined),
  };
}

/** How many sessions of this database are waiting for the one-argument advisory lock `key`. */
export async function advisoryLockWaiters(db: Knex, key: number): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
    `SELECT count(*)::int AS n FROM pg_locks
      WHERE locktype = 'advisory' AND NOT granted AND objid = :key AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
    { key },
  );
  return rows[0]!.n;
}

/** How many sessions of this database wait to lock `table` while making partitions (ensure_time_partitions_v2). */
export async function partitionMakersWaitingFor(db: Knex, table: string): Promise<number> {
  const { rows } = await db.raw<{ rows: Array<{ n: number }> }>(
    `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE NOT l.granted AND l.relation = :table::regclass AND a.datname = current_database() AND a.query LIKE '%ensure_time_partitions_v2%'`,
    { table },
  );
  return rows[0]!.n;
}

/** An empty database, for migration tests. */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  return createTestDatabase('template0');
}

/** From a query over `events`: the body each event is sent as (db/functions/event_body.sql), as `body`. */
export function sentBody(db: Knex): Knex.Raw {
  return db.raw('event_body(events) AS body');
}

/**
 * Every attempt, stored in `attempts` or in its delivery, as the platform lists them
 * (db/functions/delivery_attempts.sql): a query to filter, join and count, under the name `attempts`,
 * with `id` and `delivery_id` the TypeIDs the API names them by (the columns hold their uuids).
 */
export function attemptsListed(db: Knex): Knex.QueryBuilder {
  return db.from(
    db.raw(`(SELECT typeid_of('att', a.id) AS id, typeid_of('dlv', a.delivery_id) AS delivery_id, a.attempt_number, a.trigger, a.started_at, a.duration_ms,
                    a.status_code, a.outcome, a.error_class, a.error_message, a.response_excerpt, a.next_attempt_at
               FROM deliveries d CROSS JOIN LATERAL delivery_attempts(d.id) a) AS attempts`),
  );
}

/**
 * A row of `attempts` to insert, from an attempt as the API shows it: the id stored as the uuid its
 * TypeID encodes, trigger and outcome as their codes (db/functions/attempt_triggers.sql,
 * attempt_outcomes.sql).
 */
export function storedAttempt<R extends { id: string; trigger: string; outcome: string }>(db: Knex, row: R) {
  return {
    ...row,
    id: uuidOf('attempt', row.id),
    trigger: db.raw('array_position(attempt_triggers(), :trigger::text)', { trigger: row.trigger }),
    outcome: db.raw('array_position(attempt_outcomes(), :outcome::text)', { outcome: row.outcome }),
  };
}
