import type { Knex } from 'knex';
import { typeidToUuid, uuidToTypeid } from './lib/typeid-sql.js';

/**
 * Tenant ids are stored as `uuid` (docs/architecture.md, "Ids in the database"), the third kind
 * after endpoint and delivery ids: `tenants.id` and every table's `tenant_id`, with the foreign keys
 * to the first. An idempotency key's scope in `event_keys` is a source id or a tenant's: a tenant's
 * is kept as its uuid's text, the column staying text for source ids. The stores convert at their
 * boundary; the API, Redis keys, metrics and logs keep TypeIDs.
 *
 * No table here is partitioned by its tenant, so each column changes in place (every partition of
 * `events`, `receipts`, `attempts` and `audit_log` with its parent). Not converted:
 * `audit_log.target_id`, which holds TypeIDs as the API wrote them.
 *
 * Like 20261206000052, this release does not run beside 0.6.0, and the functions whose arguments or
 * results change type are dropped here for `migrate` to apply their files. Those that migrations
 * before 20261202000029 created (the fan-out's, the intake's, `publish_event` and `admit_due`) keep
 * their arguments and results, passing tenant ids as text: those migrations' downs drop them by
 * name, and would find none.
 */

const tz = 'timestamp with time zone';
/** Every function whose results hold a tenant id, by its arguments (unchanged by this migration). */
const signatures = [
  'admit_due_v4(integer, integer, integer, integer, integer, boolean)',
  'claim_delivery(uuid, text, integer)',
  'hand_off_v4(uuid[], integer[], integer, integer)',
  `record_attempt_v4(uuid, integer, text, ${tz}, text, integer, text, text, text, text, ${tz}, integer, text, text, text, text, uuid, boolean, integer, integer, integer, bigint)`,
  `record_successes_v4(uuid[], integer[], text[], text[], text[], ${tz}[], integer[], integer[], text[], uuid[], boolean[], integer, integer, bigint[])`,
  'publish_events(jsonb, integer)',
];

/** Tables whose `tenant_id` references `tenants(id)`, each by a foreign key of the default name. */
const referencing = ['api_keys', 'sources', 'endpoints', 'messages', 'replays', 'events', 'audit_log', 'portal_sessions'];
/** Tables whose `tenant_id` is written beside its row's parent's, with no foreign key. */
const unreferenced = ['receipts', 'deliveries', 'delivery_queue', 'attempts'];
/** A tenant's scope in `event_keys` after this migration: the text of a uuid, where a source's is a TypeID. */
const uuidText = "'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'";

async function convert(knex: Knex, type: string, to: (expression: string) => string): Promise<void> {
  for (const signature of signatures) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  for (const table of referencing) await knex.raw(`ALTER TABLE ${table} DROP CONSTRAINT ${table}_tenant_id_fkey`);
  await knex.raw(`ALTER TABLE tenants ALTER COLUMN id TYPE ${type} USING ${to('id')}`);
  for (const table of [...referencing, ...unreferenced]) {
    await knex.raw(`ALTER TABLE ${table} ALTER COLUMN tenant_id TYPE ${type} USING ${to('tenant_id')}`);
  }
  for (const table of referencing) {
    await knex.raw(`ALTER TABLE ${table} ADD CONSTRAINT ${table}_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE`);
  }
}

export async function up(knex: Knex): Promise<void> {
  await convert(knex, 'uuid', typeidToUuid);
  await knex.raw(`UPDATE event_keys SET scope_id = (${typeidToUuid('scope_id')})::text WHERE scope_id LIKE 'ten\\_%'`);
}

export async function down(knex: Knex): Promise<void> {
  await convert(knex, 'text', (expression) => uuidToTypeid('ten', expression));
  await knex.raw(`UPDATE event_keys SET scope_id = ${uuidToTypeid('ten', 'scope_id::uuid')} WHERE scope_id ~ ${uuidText}`);
}
