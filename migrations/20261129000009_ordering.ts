import type { Knex } from 'knex';

/**
 * Per-message ordering: a delivery to an endpoint with `ordering = 'per-message'` carries the key of
 * its message and its place in the message's order, so admission can hold it behind earlier ones.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE deliveries
      ADD COLUMN order_key text,
      ADD COLUMN order_hint bigint,
      ADD COLUMN order_seq bigint;
    CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_key, order_hint, order_seq)
      WHERE order_key IS NOT NULL AND status IN ('pending', 'queued', 'in_flight');
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE deliveries DROP COLUMN order_key, DROP COLUMN order_hint, DROP COLUMN order_seq;');
}
