import type { Knex } from 'knex';

/**
 * A backfill (POST /v1/endpoints/:id/backfill) is paced and followed like a bulk replay, so it is a
 * row of `replays` too; `kind` tells the two apart in GET /v1/replays/:id and the audit log.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE replays ADD COLUMN kind text NOT NULL DEFAULT 'replay' CHECK (kind IN ('replay', 'backfill'));
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE replays DROP COLUMN kind;`);
}
