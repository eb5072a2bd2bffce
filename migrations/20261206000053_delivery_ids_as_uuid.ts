import type { Knex } from 'knex';
import { typeidToUuid, uuidToTypeid } from './lib/typeid-sql.js';

/**
 * Delivery ids are stored as `uuid` (docs/architecture.md, "Ids in the database"), the second kind
 * after endpoint ids (20261206000052): `deliveries.id`, `delivery_queue.delivery_id` and
 * `attempts.delivery_id`, with the foreign key between the last and the first. The stores convert
 * at their boundary; the API, jobs and logs keep TypeIDs.
 *
 * `attempts` is partitioned by `delivery_id`, and PostgreSQL changes no partition key's type: each
 * partition is detached, converted, and attached to a new parent of the same name, on bounds that
 * are the uuids of its TypeID bounds. `partition_plan.key_type` says how a table's key is cut by
 * time (db/functions/partition_floor.sql). A partition whose detach retention had begun is
 * finished and dropped, as retention's next run would have done.
 *
 * Not converted: `audit_log.target_id`, which holds TypeIDs as the API wrote them.
 *
 * Like 20261206000052, this release does not run beside 0.6.0, and the functions whose arguments
 * or results change type are dropped here for `migrate` to apply their files. Those that migrations
 * before 20261202000029 created (the fan-out's and `admit_due`) keep their arguments and results,
 * passing delivery ids as text: those migrations' downs drop them by name, and would find none.
 */

const tz = 'timestamp with time zone';
/** Every function whose arguments or results hold a delivery id, by its arguments before (`text`) and after (`uuid`). */
const signatures = (dlv: 'text' | 'uuid') => [
  'admit_due_v4(integer, integer, integer, integer, integer, boolean)',
  `claim_delivery(${dlv}, text, integer)`,
  `delivery_attempts(${dlv})`,
  `delivery_state(${dlv}, text, integer)`,
  `event_id_range(${dlv}[])`,
  'hand_off_v4(uuid[], integer[], integer, integer)',
  `lock_waiting(${dlv}[], text[])`,
  'next_due(uuid, integer, integer, boolean)',
  `record_attempt_v4(${dlv}, integer, text, ${tz}, text, integer, text, text, text, text, ${tz}, integer, text, text, text, text, uuid, boolean, integer, integer, integer, bigint)`,
  `record_successes_v4(${dlv}[], integer[], text[], text[], text[], ${tz}[], integer[], integer[], text[], uuid[], boolean[], integer, integer, bigint[])`,
];

/** `attempts` as it stands, with `delivery_id` of the given type. */
const attemptsTable = (deliveryId: string) => `
  CREATE TABLE attempts (
    id text NOT NULL,
    delivery_id ${deliveryId} NOT NULL,
    tenant_id text,
    attempt_number integer NOT NULL,
    trigger text NOT NULL CONSTRAINT attempts_trigger_check CHECK (trigger IN ('initial', 'retry', 'replay')),
    started_at timestamptz NOT NULL,
    duration_ms integer NOT NULL,
    status_code integer,
    outcome text NOT NULL CONSTRAINT attempts_outcome_check CHECK (outcome IN ('success', 'retry', 'terminal')),
    error_class text,
    error_message text,
    response_excerpt text,
    next_attempt_at timestamptz
  ) PARTITION BY RANGE (delivery_id)`;

/**
 * Moves every partition of `attempts` to a new parent whose `delivery_id` is `type`: each is
 * detached, its column converted by `convert`, and attached again on its bounds converted the same
 * way (the first partition may start at MINVALUE).
 */
async function rebuildAttempts(knex: Knex, type: string, convert: (expression: string) => string): Promise<void> {
  const { rows: pending } = await knex.raw<{ rows: Array<{ name: string }> }>(
    "SELECT name FROM partition_bounds WHERE parent = 'attempts' AND detach_pending",
  );
  for (const { name } of pending) {
    await knex.raw('ALTER TABLE attempts DETACH PARTITION ?? FINALIZE', [name]);
    await knex.raw('DROP TABLE ??', [name]);
  }
  const { rows: partitions } = await knex.raw<{ rows: Array<{ name: string; lower: string | null; upper: string | null }> }>(
    `SELECT name, ${convert('lower_bound')}::text AS lower, ${convert('upper_bound')}::text AS upper
       FROM partition_bounds WHERE parent = 'attempts' ORDER BY name`,
  );
  for (const { name } of partitions) await knex.raw('ALTER TABLE attempts DETACH PARTITION ??', [name]);
  await knex.raw('DROP TABLE attempts');
  await knex.raw(attemptsTable(type));
  await knex.raw('CREATE INDEX attempts_delivery ON attempts (delivery_id)');
  for (const { name, lower, upper } of partitions) {
    await knex.raw(`ALTER TABLE ?? ALTER COLUMN delivery_id TYPE ${type} USING ${convert('delivery_id')}`, [name]);
    const bound = (value: string | null, open: string) => (value === null ? open : knex.raw('?', [value]).toQuery());
    await knex.raw(`ALTER TABLE attempts ATTACH PARTITION ?? FOR VALUES FROM (${bound(lower, 'MINVALUE')}) TO (${bound(upper, 'MAXVALUE')})`, [name]);
  }
  await knex.raw('ALTER TABLE attempts ADD CONSTRAINT attempts_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES deliveries(id) ON DELETE CASCADE');
}

export async function up(knex: Knex): Promise<void> {
  for (const signature of signatures('text')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey');
  await knex.raw(`ALTER TABLE deliveries ALTER COLUMN id TYPE uuid USING ${typeidToUuid('id')}`);
  await knex.raw(`ALTER TABLE delivery_queue ALTER COLUMN delivery_id TYPE uuid USING ${typeidToUuid('delivery_id')}`);
  await rebuildAttempts(knex, 'uuid', typeidToUuid);
  await knex.raw(`ALTER TABLE partition_plan ADD COLUMN key_type text NOT NULL DEFAULT 'typeid' CHECK (key_type IN ('typeid', 'uuid'))`);
  await knex.raw(`UPDATE partition_plan SET key_type = 'uuid' WHERE table_name = 'attempts'`);
}

export async function down(knex: Knex): Promise<void> {
  for (const signature of signatures('uuid')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('DROP FUNCTION IF EXISTS partition_floor(partition_plan, timestamp with time zone)');
  await knex.raw('DROP FUNCTION IF EXISTS uuid_floor(timestamp with time zone)');
  await knex.raw('ALTER TABLE partition_plan DROP COLUMN key_type');
  await knex.raw('ALTER TABLE attempts DROP CONSTRAINT attempts_delivery_id_fkey');
  await knex.raw(`ALTER TABLE deliveries ALTER COLUMN id TYPE text COLLATE "C" USING ${uuidToTypeid('dlv', 'id')}`);
  await knex.raw(`ALTER TABLE delivery_queue ALTER COLUMN delivery_id TYPE text USING ${uuidToTypeid('dlv', 'delivery_id')}`);
  await rebuildAttempts(knex, 'text COLLATE "C"', (expression) => uuidToTypeid('dlv', expression));
}
