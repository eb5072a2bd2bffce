import type { Knex } from 'knex';

/**
 * A delivery's first try, when it succeeded, beside the delivery instead of in a row of its own:
 * an `attempts` row costs ~220 bytes with its index entry (docs/performance.md), and most
 * deliveries have exactly one, a success, whose only facts not already on the delivery are when it
 * started, how long it took, its status code and the start of the receiver's answer.
 *
 * Expand step: this release reads every attempt through db/functions/delivery_attempts.sql, which
 * lists a folded first try as the attempt it was (id `att_` + the delivery id's suffix, number 1, trigger
 * `initial`, outcome `success`), and still writes every attempt to `attempts`, which release
 * 0.3.0's processes read during a rolling deploy. The release after it folds first-try successes
 * (docs/operations/upgrade.md, "Which versions run side by side").
 *
 * Metadata only: nullable columns without defaults rewrite no row.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE deliveries
      ADD COLUMN first_try_started_at timestamptz,
      ADD COLUMN first_try_duration_ms integer,
      ADD COLUMN first_try_status_code smallint,
      ADD COLUMN first_try_excerpt text,
      ADD CONSTRAINT deliveries_first_try_whole
        CHECK ((first_try_started_at IS NULL) = (first_try_duration_ms IS NULL)
           AND (first_try_started_at IS NULL) = (first_try_status_code IS NULL)) NOT VALID`);
}

/**
 * Gives every folded first try its `attempts` row back, as release 0.3.0 reads it and as
 * delivery_attempts lists it, then drops the columns. Runs with every process stopped
 * (docs/operations/upgrade.md, "Rollback"). The function that reads the columns goes with them.
 */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    INSERT INTO attempts (id, delivery_id, attempt_number, trigger, started_at, duration_ms, status_code, outcome, response_excerpt)
    SELECT 'att_' || substr(d.id, 5), d.id, 1, 'initial', d.first_try_started_at, d.first_try_duration_ms, d.first_try_status_code,
           'success', d.first_try_excerpt
      FROM deliveries d
     WHERE d.first_try_started_at IS NOT NULL`);
  await knex.raw('DROP FUNCTION IF EXISTS delivery_attempts(text)');
  await knex('schema_functions').where('name', 'delivery_attempts').delete();
  await knex.raw(`
    ALTER TABLE deliveries
      DROP CONSTRAINT deliveries_first_try_whole,
      DROP COLUMN first_try_started_at, DROP COLUMN first_try_duration_ms,
      DROP COLUMN first_try_status_code, DROP COLUMN first_try_excerpt`);
}
