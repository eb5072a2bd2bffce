import type { Knex } from 'knex';

/** Operational events (platform.endpoint.disabled, platform.delivery.dead) are events of their own origin. */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE events DROP CONSTRAINT events_origin_check;
    ALTER TABLE events ADD CONSTRAINT events_origin_check CHECK (origin IN ('api', 'callback', 'reconcile', 'platform'));
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DELETE FROM events WHERE origin = 'platform';
    ALTER TABLE events DROP CONSTRAINT events_origin_check;
    ALTER TABLE events ADD CONSTRAINT events_origin_check CHECK (origin IN ('api', 'callback', 'reconcile'));
  `);
}
