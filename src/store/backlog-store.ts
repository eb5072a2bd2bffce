import type { Knex } from 'knex';

/**
 * The global numbers behind the backlog gauges: unfinished work from delivery_queue (the mirror of
 * unfinished deliveries, small), dead letters from deliveries_dead (dead_reason is set exactly when dead).
 * A paused endpoint's work is held on purpose, so it is backlog but never late: the oldest due
 * delivery leaves it out, and the paused endpoints are counted apart.
 * Unscoped: the gauges are the platform's, over every tenant. Raw: five scalar subqueries in one
 * round trip, which the builder would write as five queries.
 */
export async function backlogSnapshot(db: Knex) {
  const { rows } = await db.raw(
    `SELECT
       (SELECT count(*) FROM delivery_queue)::int AS backlog,
       (SELECT count(*) FROM deliveries WHERE dead_reason IS NOT NULL)::int AS dead,
       COALESCE(EXTRACT(epoch FROM now() - (
         SELECT min(q.next_attempt_at) FROM delivery_queue q
          WHERE q.status = 'pending' AND q.next_attempt_at <= now()
            AND NOT EXISTS (SELECT 1 FROM endpoints e WHERE e.id = q.endpoint_id AND e.status = 'paused'))), 0)::float8 AS oldest,
       (SELECT count(*) FROM endpoints WHERE circuit_open_until > now() AND deleted_at IS NULL)::int AS open_circuits,
       (SELECT count(*) FROM endpoints WHERE status = 'paused' AND deleted_at IS NULL)::int AS paused`,
  );
  const r = rows[0];
  return { backlog: r.backlog, deadLetters: r.dead, oldestPendingAgeSeconds: r.oldest, openCircuits: r.open_circuits, pausedEndpoints: r.paused };
}
