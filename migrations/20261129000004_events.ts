import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE events (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text REFERENCES sources(id) ON DELETE CASCADE,
      origin text NOT NULL CHECK (origin IN ('api', 'callback', 'reconcile')),
      type text NOT NULL,
      message_id text,
      dedupe_key text,
      idempotency_key text,
      request_hash text,
      status text,
      status_rank integer,
      stale boolean NOT NULL DEFAULT false,
      provider_sequence bigint,
      -- Global acceptance order; per-message ordering follows it.
      seq bigserial NOT NULL,
      -- The exact bytes sent to every endpoint on every attempt.
      body text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      CONSTRAINT events_source_dedupe UNIQUE (source_id, dedupe_key),
      CONSTRAINT events_tenant_idempotency UNIQUE (tenant_id, idempotency_key)
    );
    CREATE INDEX events_tenant_created ON events (tenant_id, id DESC);
    CREATE INDEX events_tenant_type ON events (tenant_id, type, id DESC);
    CREATE INDEX events_tenant_message ON events (tenant_id, message_id, seq) WHERE message_id IS NOT NULL;

    -- One row per HTTP callback that passed verification: the provider retry chain.
    CREATE TABLE receipts (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
      event_id text NOT NULL REFERENCES events(id) ON DELETE CASCADE,
      outcome text NOT NULL CHECK (outcome IN ('accepted', 'duplicate', 'stale')),
      origin text NOT NULL CHECK (origin IN ('callback', 'reconcile')),
      body_digest text NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX receipts_event ON receipts (event_id, received_at);
    -- Byte-identical repeats are answered from this index without parsing the body again.
    CREATE INDEX receipts_source_digest ON receipts (source_id, body_digest);

    CREATE TABLE messages (
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      source_id text REFERENCES sources(id) ON DELETE CASCADE,
      message_id text NOT NULL,
      status text,
      status_rank integer NOT NULL DEFAULT 0,
      status_final boolean NOT NULL DEFAULT false,
      last_event_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      reconciled_at timestamptz,
      CONSTRAINT messages_identity UNIQUE NULLS NOT DISTINCT (tenant_id, source_id, message_id)
    );
    CREATE INDEX messages_open ON messages (source_id, updated_at) WHERE NOT status_final;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP TABLE messages; DROP TABLE receipts; DROP TABLE events;');
}
