import type { Knex } from 'knex';

/**
 * Tenants manage their own API keys, and sources can be renamed, given a new secret and deleted.
 *
 * - api_keys: a name people recognise, the key's visible start (`prefix`, so a listed key can be
 *   matched to the one in a config file without ever showing the key), and when it was last used.
 *   Keys created before this migration have no known prefix: only their hash was ever stored.
 * - sources: the previous secret keeps verifying until previous_secret_expires_at, so a provider's
 *   retries signed before the change are not refused; deleted_at makes a deletion soft, because
 *   events and receipts reference their source with ON DELETE CASCADE and must stay queryable.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE api_keys
      ADD COLUMN name text NOT NULL DEFAULT 'default',
      ADD COLUMN prefix text,
      ADD COLUMN last_used_at timestamptz;
    ALTER TABLE api_keys ALTER COLUMN name DROP DEFAULT;
    ALTER TABLE sources
      ADD COLUMN previous_secret_enc text,
      ADD COLUMN previous_secret_expires_at timestamptz,
      ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now(),
      ADD COLUMN deleted_at timestamptz;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE sources
      DROP COLUMN deleted_at,
      DROP COLUMN updated_at,
      DROP COLUMN previous_secret_expires_at,
      DROP COLUMN previous_secret_enc;
    ALTER TABLE api_keys
      DROP COLUMN last_used_at,
      DROP COLUMN prefix,
      DROP COLUMN name;
  `);
}
