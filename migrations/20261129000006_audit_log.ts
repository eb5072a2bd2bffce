import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE audit_log (
      id text PRIMARY KEY,
      tenant_id text REFERENCES tenants(id) ON DELETE CASCADE,
      actor_type text NOT NULL CHECK (actor_type IN ('api_key', 'admin', 'system')),
      actor_id text,
      action text NOT NULL,
      target_type text NOT NULL,
      target_id text NOT NULL,
      reason text,
      details jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id DESC);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE audit_log;');
}
