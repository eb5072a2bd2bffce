import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    -- The record of the platform retry chain. Status moves
    --   pending -> queued (admitted to Redis) -> in_flight (claimed by a worker) -> succeeded | pending | dead
    -- and leases on queued/in_flight let a sweeper take back work that Redis or a worker lost.
    CREATE TABLE deliveries (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events(id) ON DELETE CASCADE,
      endpoint_id text NOT NULL REFERENCES endpoints(id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('pending', 'queued', 'in_flight', 'succeeded', 'dead')),
      next_trigger text NOT NULL DEFAULT 'initial' CHECK (next_trigger IN ('initial', 'retry', 'replay')),
      attempt_count integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz,
      lease_until timestamptz,
      deadline_at timestamptz NOT NULL,
      last_status_code integer,
      last_error text,
      dead_reason text CHECK (dead_reason IN ('max_attempts', 'max_age', 'terminal', 'endpoint_disabled')),
      succeeded_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT deliveries_event_endpoint UNIQUE (event_id, endpoint_id)
    );
    CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
    CREATE INDEX deliveries_active ON deliveries (endpoint_id) WHERE status IN ('queued', 'in_flight');
    CREATE INDEX deliveries_leases ON deliveries (lease_until) WHERE status IN ('queued', 'in_flight');
    CREATE INDEX deliveries_deadline ON deliveries (deadline_at) WHERE status = 'pending';
    CREATE INDEX deliveries_tenant ON deliveries (tenant_id, id DESC);
    CREATE INDEX deliveries_tenant_status ON deliveries (tenant_id, status, id DESC);
    CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id DESC);

    CREATE TABLE attempts (
      id text PRIMARY KEY,
      delivery_id text NOT NULL REFERENCES deliveries(id) ON DELETE CASCADE,
      tenant_id text NOT NULL,
      attempt_number integer NOT NULL,
      trigger text NOT NULL CHECK (trigger IN ('initial', 'retry', 'replay')),
      started_at timestamptz NOT NULL,
      duration_ms integer NOT NULL,
      status_code integer,
      outcome text NOT NULL CHECK (outcome IN ('success', 'retry', 'terminal')),
      error_class text,
      error_message text,
      response_excerpt text,
      next_attempt_at timestamptz
    );
    CREATE INDEX attempts_delivery ON attempts (delivery_id, started_at);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE attempts; DROP TABLE deliveries;');
}
