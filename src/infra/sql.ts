/*
 * How this codebase writes SQL (test/unit/sql-style.test.ts holds it to this):
 * - `statement()` below on hot paths, run once per event or per attempt (intake, publish, dispatch);
 * - the knex builder everywhere else;
 * - `knex.raw` only where the builder cannot write the query (a data-modifying or recursive CTE,
 *   LATERAL, DDL), with `:name` bindings, never `?`, and a comment saying why;
 * - the raw pg client only where knex cannot do the job (a session-level lock, creating the
 *   database), with a comment saying why;
 * - SQL only in src/store/ and src/delivery/, and a tenant's rows only through TenantScope
 *   (src/store/tenant-scope.ts); an unscoped connection is named `platformDb`.
 */
import type { Knex } from 'knex';
import type pg from 'pg';

/**
 * A statement on a hot path (claim, record, intake), sent to PostgreSQL directly as a named
 * prepared statement: each pooled connection parses and plans it once instead of on every call,
 * and the per-call work of knex's raw bindings is skipped (its share of busy time is in
 * docs/performance.md, "Profile findings").
 * Written with `:name` parameters for readability; they become `$n` once, when the module loads.
 */
export interface Statement {
  name: string;
  text: string;
  params: string[];
}

export function statement(name: string, sql: string): Statement {
  const params: string[] = [];
  // `::type` casts are not parameters: a parameter's colon never follows another colon.
  const text = sql.replace(/(?<!:):([A-Za-z]\w*)/g, (_, param: string) => {
    const at = params.indexOf(param);
    if (at >= 0) return `$${at + 1}`;
    params.push(param);
    return `$${params.length}`;
  });
  return { name, text, params };
}

function bind(st: Statement, values: Record<string, unknown>): unknown[] {
  return st.params.map((p) => {
    if (!(p in values)) throw new TypeError(`statement ${st.name}: no value for :${p}`);
    return values[p];
  });
}

/**
 * Runs a statement on a connection from knex's pool, so pool size, acquire timeout, query timeout
 * and the pool's handling of broken connections stay the same as for every other query.
 */
export async function run<R extends pg.QueryResultRow>(db: Knex, st: Statement, values: Record<string, unknown>): Promise<R[]> {
  notInTransaction(db, st.name);
  const conn: pg.PoolClient = await db.client.acquireConnection();
  try {
    return await runOn<R>(conn, st, values);
  } finally {
    await db.client.releaseConnection(conn);
  }
}

/** Runs a statement on the connection given (a pooled one that `run` took, or one being warmed). */
export async function runOn<R extends pg.QueryResultRow>(conn: pg.ClientBase, st: Statement, values: Record<string, unknown>): Promise<R[]> {
  const result = await conn.query<R>({ name: st.name, text: st.text, values: bind(st, values) });
  return result.rows;
}

/**
 * One hot statement run once on a new pooled connection, before the pool hands it out, so the
 * first real call finds it parsed and planned and its SQL functions compiled in that backend (the
 * cold cost docs/performance.md measures as latency.coldP99Ms). It runs inside a transaction that
 * is rolled back, so it leaves no row behind, only the sequence values it drew: with values that
 * match nothing, or on rows of a tenant of the warm-up's own (makeWarmUpTenant), when only rows
 * make every statement of a function run.
 */
export type WarmUp = (run: <R extends pg.QueryResultRow>(st: Statement, values: Record<string, unknown>) => Promise<R[]>) => Promise<void>;

/**
 * Runs each warm-up on `conn` in one transaction, then rolls it back. A warm-up that fails is
 * reported and the rest are skipped: the connection is as usable as an unwarmed one (a statement
 * whose parse failed is parsed again on its first real call).
 */
export async function warmConnection(conn: pg.ClientBase, warmUps: readonly WarmUp[]): Promise<Error | undefined> {
  if (warmUps.length === 0) return undefined;
  await conn.query('BEGIN');
  try {
    for (const warmUp of warmUps) await warmUp((st, values) => runOn(conn, st, values));
    return undefined;
  } catch (err) {
    return err instanceof Error ? err : new Error(String(err));
  } finally {
    await conn.query('ROLLBACK');
  }
}

/** These take their own pooled connection: given a transaction, they would silently run outside it. */
function notInTransaction(db: Knex, what: string): void {
  if ((db as { isTransaction?: boolean }).isTransaction) throw new TypeError(`${what}: runs on its own connection, not inside a transaction`);
}
