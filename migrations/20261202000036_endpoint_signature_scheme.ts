import type { Knex } from 'knex';

/**
 * How an endpoint's requests are signed: `hmac` (v1, a shared `whsec_` secret) or `ed25519` (v1a,
 * the platform holds a `whsk_` private key in secret_enc). Fixed at creation; the API shows it and
 * derives the public key from the stored private key. Dispatch tells the two apart by the stored
 * secret's prefix, so the claimed delivery's columns need not change.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE endpoints ADD COLUMN signature_scheme text NOT NULL DEFAULT 'hmac'
      CONSTRAINT endpoints_signature_scheme_check CHECK (signature_scheme IN ('hmac', 'ed25519'))`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE endpoints DROP COLUMN signature_scheme');
}
