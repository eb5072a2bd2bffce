import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE sources (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      type text NOT NULL,
      name text NOT NULL,
      secret_enc text NOT NULL,
      reconcile_base_url text,
      reconcile_api_key_enc text,
      reconcile_after_seconds integer,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX sources_tenant ON sources (tenant_id, id);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE sources;');
}
