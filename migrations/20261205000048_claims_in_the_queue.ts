import type { Knex } from 'knex';

/**
 * A delivery claimed by a slot of its own process keeps the claim in its `delivery_queue` row only
 * (db/functions/admit_due_v4.sql, hand_off_v4.sql): `deliveries` is written when the delivery is
 * created and when its attempt's result is recorded, not when it starts. The queue row carries
 * what such a claim needs beside its status and lease: the attempt number the claim gave the
 * delivery (`attempt_count`) and when it was made (`claimed_at`, the start of a lost attempt's row).
 * Only such claims write them; a claim written to `deliveries` (a Redis job's, and every claim of
 * release 0.5.0's processes) is read there (db/functions/claim_in_queue.sql says which).
 *
 * Metadata only: nullable columns without defaults rewrite no row.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE delivery_queue ADD COLUMN attempt_count integer, ADD COLUMN claimed_at timestamptz');
}

/**
 * Runs with every process stopped (docs/operations/upgrade.md, "Rollback"). Release 0.5.0 knows a
 * claim only by `deliveries.status`: each claim kept in the queue is written there, as 0.5.0 made
 * it, so its sweep takes it back if its attempt never reports; which claims those are is
 * claim_in_queue's rule, written out here as it stands. The functions that read the columns
 * (delivery_state, admit_due_v4, hand_off_v4, record_attempt_v4, record_successes_v4) fail without
 * them until the older release's `migrate` has run, as after every down (docs/operations/upgrade.md).
 */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    UPDATE deliveries d SET status = 'in_flight', attempt_count = q.attempt_count, lease_until = q.lease_until, updated_at = q.claimed_at
      FROM delivery_queue q
     WHERE q.delivery_id = d.id AND d.status = 'pending' AND q.status = 'in_flight' AND d.attempt_count = q.attempt_count - 1`);
  await knex.raw('ALTER TABLE delivery_queue DROP COLUMN attempt_count, DROP COLUMN claimed_at');
}
