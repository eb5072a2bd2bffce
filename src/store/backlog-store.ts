import type { Knex } from 'knex';

/**
 * The global numbers behind the backlog gauges: unfinished work from delivery_queue (the mirror of
 * unfinished deliveries, small), dead letters from deliveries_dead (dead_reason is set exactly when dead).
 * Unscoped: the gauges are the platform's, over every tenant. Raw: four scalar subqueries in one
 * round trip, which the builder would write as four queries.
 */
export async function backlogSnapshot(db: Knex) {
  const { rows } = await db.raw(
    `SELECT
       (SELECT count(*) FROM delivery_queue)::int AS backlog,
       (SELECT count(*) FROM deliveries WHERE dead_reason IS NOT NULL)::int AS dead,
       COALESCE(EXTRACT(epoch FROM now() - (SELECT min(next_attempt_at) FROM delivery_queue WHERE status = 'pending' AND next_attempt_at <= now())), 0)::float8 AS oldest,
       (SELECT count(*) FROM endpoints WHERE circuit_open_until > now() AND deleted_at IS NULL)::int AS open_circuits`,
  );
  const r = rows[0];
  return { backlog: r.backlog, deadLetters: r.dead, oldestPendingAgeSeconds: r.oldest, openCircuits: r.open_circuits };
}
