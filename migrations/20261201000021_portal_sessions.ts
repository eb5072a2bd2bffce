import type { Knex } from 'knex';

/**
 * Portal links: a single-use link token that is exchanged once for a session token, both stored as
 * SHA-256 only. The scope (capabilities, endpoints, event types) is fixed at creation; revoking or
 * expiring a row ends the link and the session together. What a session with `manage` changes is
 * audited with the session as its actor.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE portal_sessions (
      id text PRIMARY KEY,
      tenant_id text NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      link_hash text NOT NULL UNIQUE,
      session_hash text UNIQUE,
      capabilities text[] NOT NULL,
      endpoint_ids text[],
      event_types text[],
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      exchanged_at timestamptz,
      revoked_at timestamptz
    );
    CREATE INDEX portal_sessions_tenant ON portal_sessions (tenant_id, id DESC);
  `);
  await replaceActorCheck(knex, ['api_key', 'portal_session', 'admin', 'system']);
}

export async function down(knex: Knex): Promise<void> {
  // The sessions are gone with their table; what they did stays in the log, attributed to the system.
  await knex.raw(`
    UPDATE audit_log SET actor_type = 'system' WHERE actor_type = 'portal_session';
    DROP TABLE portal_sessions;
  `);
  await replaceActorCheck(knex, ['api_key', 'admin', 'system']);
}

/**
 * The audit log's actor_type check, whatever it is called (the partitioning migration recreated the
 * table, so PostgreSQL chose the name), replaced under the same name by one allowing `actors`.
 */
async function replaceActorCheck(knex: Knex, actors: string[]): Promise<void> {
  const { rows } = (await knex.raw(`
    SELECT conname FROM pg_constraint
     WHERE conrelid = 'audit_log'::regclass AND contype = 'c' AND pg_get_constraintdef(oid) LIKE '%actor_type%'`)) as { rows: Array<{ conname: string }> };
  for (const { conname } of rows) await knex.raw(`ALTER TABLE audit_log DROP CONSTRAINT "${conname}"`);
  const name = rows[0]?.conname ?? 'audit_log_actor_type_check';
  // DDL takes no bind parameters; the names are this file's own constants.
  await knex.raw(`ALTER TABLE audit_log ADD CONSTRAINT "${name}" CHECK (actor_type IN (${actors.map((a) => `'${a}'`).join(', ')}))`);
}
