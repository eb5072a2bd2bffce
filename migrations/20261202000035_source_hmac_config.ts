import type { Knex } from 'knex';

/**
 * A generic `hmac` source carries its signing scheme (header, algorithm, encoding, signed content,
 * where the id and type are). It is read whole with the source and never queried by field, so it
 * is one JSON column; the provider presets need none.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE sources ADD COLUMN hmac_config jsonb`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`ALTER TABLE sources DROP COLUMN hmac_config`);
}
