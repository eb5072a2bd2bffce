import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE replays (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      actor_type text NOT NULL,
      actor_id text,
      reason text NOT NULL,
      filter jsonb NOT NULL,
      total integer NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX replays_tenant ON replays (tenant_id, id DESC);

    -- A replay gives a delivery a fresh attempt budget: attempts are counted from this base.
    ALTER TABLE deliveries
      ADD COLUMN replay_id text REFERENCES replays(id) ON DELETE SET NULL,
      ADD COLUMN attempt_base integer NOT NULL DEFAULT 0,
      -- Set by a replay: every later try of the delivery says webhook-replay: true.
      ADD COLUMN replayed_at timestamptz;
    CREATE INDEX deliveries_replay ON deliveries (replay_id, status) WHERE replay_id IS NOT NULL;
    CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_reason, id DESC) WHERE status = 'dead';
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    ALTER TABLE deliveries DROP COLUMN replay_id, DROP COLUMN attempt_base, DROP COLUMN replayed_at;
    DROP INDEX IF EXISTS deliveries_dead;
    DROP TABLE replays;
  `);
}
