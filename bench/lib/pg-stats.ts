import type { Knex } from 'knex';

export interface PgCounters {
  commits: number;
  rowsInserted: number;
  rowsUpdated: number;
}

/**
 * Transaction and row counters of the bench database (pg_stat_database). PostgreSQL publishes a
 * backend's counts at most once a second or when it disconnects, so take the "after" snapshot
 * after the platform's connections have closed. The bench's own few queries are included.
 */
export async function pgCounters(db: Knex): Promise<PgCounters> {
  const { rows } = await db.raw<{ rows: Array<{ commits: number; ins: number; upd: number }> }>(
    `SELECT xact_commit AS commits, tup_inserted AS ins, tup_updated AS upd
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  const r = rows[0]!;
  return { commits: Number(r.commits), rowsInserted: Number(r.ins), rowsUpdated: Number(r.upd) };
}

export function perUnit(before: PgCounters, after: PgCounters, units: number): Record<string, number> {
  const f = (a: number, b: number) => Math.round(((b - a) / units) * 100) / 100;
  return {
    commits: f(before.commits, after.commits),
    rowsInserted: f(before.rowsInserted, after.rowsInserted),
    rowsUpdated: f(before.rowsUpdated, after.rowsUpdated),
  };
}

export interface TableCounters {
  updates: number;
  hotUpdates: number;
  inserts: number;
  indexes: number;
}

/**
 * Row-version churn of one table: an UPDATE that changes an indexed column (status, for the
 * partial indexes) cannot be HOT, so every index of the table gets a new entry for it.
 */
export async function tableCounters(db: Knex, table: string): Promise<TableCounters> {
  const { rows } = await db.raw<{ rows: Array<{ upd: number; hot: number; ins: number; idx: number }> }>(
    `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_ins AS ins,
            (SELECT count(*) FROM pg_index i WHERE i.indrelid = s.relid)::int AS idx
       FROM pg_stat_user_tables s WHERE relname = ?`,
    [table],
  );
  const r = rows[0]!;
  return { updates: Number(r.upd), hotUpdates: Number(r.hot), inserts: Number(r.ins), indexes: Number(r.idx) };
}
