import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE endpoints (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      url text NOT NULL,
      description text,
      event_types text[] NOT NULL DEFAULT '{}',
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
      disabled_reason text,
      max_concurrency integer NOT NULL,
      rate_limit_per_second integer,
      retry_policy jsonb NOT NULL DEFAULT '{}',
      ordering text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'per-message')),
      secret_enc text NOT NULL,
      previous_secret_enc text,
      previous_secret_expires_at timestamptz,
      -- Dispatch health: the circuit breaker and the auto-disable window read these.
      consecutive_failures integer NOT NULL DEFAULT 0,
      failing_since timestamptz,
      circuit_open_until timestamptz,
      -- Token bucket for rateLimitPerSecond, refilled by the admission step.
      rate_tokens double precision,
      rate_tokens_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    );
    CREATE INDEX endpoints_tenant ON endpoints (tenant_id, id) WHERE deleted_at IS NULL;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE endpoints;');
}
