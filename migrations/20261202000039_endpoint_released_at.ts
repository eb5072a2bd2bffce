import type { Knex } from 'knex';

/**
 * When the endpoint last began to take work it had been kept from: resumed or re-enabled, its
 * circuit closed, its URL changed, or a backfill gave it past events. A first attempt of an event
 * accepted before then waited for the endpoint, not for the platform, so it is left out of the
 * delivery-latency objective ("for endpoints that are up", docs/runbook.md). Null: never held.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints ADD COLUMN released_at timestamptz');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints DROP COLUMN released_at');
}
