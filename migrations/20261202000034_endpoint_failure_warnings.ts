import type { Knex } from 'knex';

/**
 * Warnings before an auto-disable: the highest share of AUTO_DISABLE_AFTER_SECONDS (in percent)
 * that the current failure streak has been announced at, so each threshold is announced once per
 * streak. NULL: nothing announced yet. A success clears it together with failing_since
 * (db/functions/endpoint_health_after_attempts.sql).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE endpoints ADD COLUMN failure_warned_percent smallint
      CONSTRAINT endpoints_failure_warned_percent_check CHECK (failure_warned_percent BETWEEN 1 AND 100)`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints DROP COLUMN failure_warned_percent');
}
