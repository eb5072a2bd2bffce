import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Knex } from 'knex';
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

/** An empty database, for migration tests. */
export async function createEmptyDatabase(): Promise<TestDatabase> {
  return createTestDatabase('template0');
}

/** From a query over `events`: the body each event is sent as (db/functions/event_body.sql), as `body`. */
export function sentBody(db: Knex): Knex.Raw {
  return db.raw('event_body(events) AS body');
}

/**
 * Moves a delivery's first try, a success, out of `attempts` into the delivery's first_try_*
 * columns (migration 20261204000045), as a release that folds first tries stores it; answers the
 * number of attempts rows it removed (1 when there was such a first try).
 */
export async function foldFirstTry(db: Knex, deliveryId: string): Promise<number> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: unknown[] }>(
      `WITH first AS (
         DELETE FROM attempts WHERE delivery_id = :id AND attempt_number = 1 AND trigger = 'initial' AND outcome = 'success'
         RETURNING started_at, duration_ms, status_code, response_excerpt)
       UPDATE deliveries d SET first_try_started_at = f.started_at, first_try_duration_ms = f.duration_ms,
              first_try_status_code = f.status_code, first_try_excerpt = f.response_excerpt
         FROM first f WHERE d.id = :id RETURNING d.id`,
      { id: deliveryId },
    );
    return rows.length;
  });
}
