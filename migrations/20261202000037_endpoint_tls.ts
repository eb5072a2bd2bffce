import type { Knex } from 'knex';

/**
 * An endpoint's mutual TLS settings (client certificate, its key, an optional private CA bundle) as
 * one JSON object sealed with the SecretBox, bound to the endpoint's id like secret_enc and
 * headers_enc. Null: plain server-authenticated TLS against the system's roots.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints ADD COLUMN tls_enc text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints DROP COLUMN tls_enc');
}
