/**
 * vacuum: removes from delivery_queue's indexes the entries of deliveries that left the mirror.
 *
 * Every pick of an endpoint's next due delivery walks the index entries of the deliveries taken
 * before it until VACUUM removes them, and autovacuum looks at a database at most once a minute;
 * docs/performance.md ("Dispatch: a queue PostgreSQL can keep small") has what that cost. The
 * mirror holds only unfinished deliveries, so vacuuming it is cheap, and each sweep asks for it
 * (at most once a second across processes, see below).
 * - PARALLEL 0: index workers cost more to start than such small indexes take to clean.
 * - TRUNCATE false: giving back the empty pages at the end would take an exclusive lock on the
 *   table every second, for pages the next deliveries fill again.
 * - SKIP_LOCKED: a process whose neighbour is vacuuming right now skips its turn instead of waiting.
 * - The pool's statement timeout (7.5 s) bounds it too: 1,000,000 rows with half of them dead took
 *   0.7 s, so only a queue of some ten million is left to autovacuum alone.
 */
import type { Knex } from 'knex';

/**
 * Vacuums the mirror unless any process (or autovacuum) finished doing so less than `minIntervalMs`
 * ago: every worker sweeps every second, and ten workers each vacuuming a mirror that holds a large
 * backlog would keep a core busy for one vacuum's worth of benefit. Answers whether it vacuumed.
 */
export async function vacuumMirror(db: Knex, minIntervalMs = 1_000): Promise<boolean> {
  const { rows } = await db.raw<{ rows: Array<{ ago_ms: number | null }> }>(
    `SELECT (extract(epoch FROM now() - greatest(last_vacuum, last_autovacuum)) * 1000)::float8 AS ago_ms
       FROM pg_stat_user_tables WHERE relid = 'delivery_queue'::regclass`,
  );
  const ago = rows[0]?.ago_ms;
  if (ago !== null && ago !== undefined && ago < minIntervalMs) return false;
  await db.raw('VACUUM (SKIP_LOCKED, PARALLEL 0, TRUNCATE false) delivery_queue');
  return true;
}
