import type { Knex } from 'knex';
import { rebuildPartitioned, type PartitionedTable } from './lib/partitioned-tables.js';
import { typeidToUuid, uuidToTypeid } from './lib/typeid-sql.js';

/**
 * Event ids are stored as `uuid` (docs/architecture.md, "Ids in the database"), the fourth kind
 * after endpoint, delivery and tenant ids: `events.id`, `receipts.event_id`,
 * `deliveries.event_id`, `event_keys.event_id` and `messages.last_event_id`, with the foreign key
 * from receipts to events. `events.test_endpoint_id` holds endpoint ids, as `uuid` since
 * 20261206000052 everywhere else, and moves in the same rewrite. The stores convert at their
 * boundary; the API, the `webhook-id` header, Redis jobs, logs and spans keep TypeIDs, and so does
 * every body sent, whose envelope `event_body` writes.
 *
 * `events` and `receipts` are partitioned by event id, and PostgreSQL changes no partition key's
 * type: each is rebuilt on a new parent (migrations/lib/partitioned-tables.ts), after dropping what
 * depends on the old one: the foreign keys to and from them, the sequence's ownership, and the two
 * functions of the row type `events` (`event_body(events)`, `event_in_range`), which `migrate`
 * applies again from their files.
 *
 * Like 20261206000052, this release does not run beside 0.6.0, and the functions whose arguments or
 * results change type are dropped here. Those that migrations before 20261202000029 created (the
 * fan-out's, the intake's and `publish_event`) keep their arguments and results, passing event ids
 * as text.
 */

const tz = 'timestamp with time zone';
/**
 * Every function whose arguments or results hold an event id or the row type `events`, by its
 * arguments before (`text`) and after (`uuid`) this migration; and `event_body`'s other signature,
 * whose file applies both (`migrate` applies a file when its function is missing by name).
 */
const signatures = (evt: 'text' | 'uuid') => [
  'admit_due_v4(integer, integer, integer, integer, integer, boolean)',
  `claim_delivery(uuid, ${evt}, integer)`,
  'hand_off_v4(uuid[], integer[], integer, integer)',
  `record_attempt_v4(uuid, integer, text, ${tz}, text, integer, text, text, text, text, ${tz}, integer, text, text, text, text, uuid, boolean, integer, integer, integer, bigint)`,
  `record_successes_v4(uuid[], integer[], text[], text[], text[], ${tz}[], integer[], integer[], text[], uuid[], boolean[], integer, integer, bigint[])`,
  'publish_events(jsonb, integer)',
  'event_id_range(uuid[])',
  `event_in_range(${evt}, ${evt}, ${evt})`,
  'event_body(events)',
  `event_body(text, text, text, ${tz}, text, text)`,
];

/** The parents as they stand, with the event id (and `test_endpoint_id`) of the given type. */
const eventsTable = (id: string, endpointId: string): string => `
  CREATE TABLE events (
    id ${id} NOT NULL,
    tenant_id uuid NOT NULL,
    source_id text,
    origin text NOT NULL,
    type text NOT NULL,
    message_id text,
    dedupe_key text,
    idempotency_key text,
    request_hash text,
    status text,
    status_rank integer,
    stale boolean DEFAULT false NOT NULL,
    provider_sequence bigint,
    seq bigint DEFAULT nextval('events_seq_seq'::regclass) NOT NULL,
    body text,
    created_at timestamp with time zone DEFAULT now() NOT NULL,
    trace_parent text,
    data text,
    test_endpoint_id ${endpointId},
    CONSTRAINT events_origin_check CHECK (origin = ANY (ARRAY['api'::text, 'callback'::text, 'reconcile'::text, 'platform'::text]))
  ) PARTITION BY RANGE (id)`;

const receiptsTable = (eventId: string): string => `
  CREATE TABLE receipts (
    id text NOT NULL,
    tenant_id uuid NOT NULL,
    source_id text NOT NULL,
    event_id ${eventId} NOT NULL,
    outcome text NOT NULL,
    origin text NOT NULL,
    body_digest text NOT NULL,
    received_at timestamp with time zone DEFAULT now() NOT NULL,
    CONSTRAINT receipts_origin_check CHECK (origin = ANY (ARRAY['callback'::text, 'reconcile'::text])),
    CONSTRAINT receipts_outcome_check CHECK (outcome = ANY (ARRAY['accepted'::text, 'duplicate'::text, 'stale'::text]))
  ) PARTITION BY RANGE (event_id)`;

const eventsIndexes = [
  'ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (id)',
  'CREATE INDEX events_tenant_created ON events USING btree (tenant_id, id)',
  'CREATE INDEX events_tenant_message ON events USING btree (tenant_id, message_id, seq) WHERE (message_id IS NOT NULL)',
  'CREATE INDEX events_tenant_type ON events USING btree (tenant_id, type, id)',
];
const receiptsIndexes = [
  'ALTER TABLE receipts ADD CONSTRAINT receipts_pkey PRIMARY KEY (event_id, id)',
  'CREATE INDEX receipts_source_digest ON receipts USING btree (source_id, body_digest)',
];

/** The tables as this migration leaves them (`uuid`) or finds them (`text`). */
function tables(as: 'uuid' | 'text'): { events: PartitionedTable; receipts: PartitionedTable } {
  const toUuid = as === 'uuid';
  const eventId = toUuid ? 'uuid' : 'text COLLATE "C"';
  const event = toUuid ? typeidToUuid : (e: string) => uuidToTypeid('evt', e);
  const endpoint = toUuid ? typeidToUuid : (e: string) => uuidToTypeid('ep', e);
  return {
    events: {
      name: 'events',
      create: eventsTable(eventId, toUuid ? 'uuid' : 'text'),
      indexes: eventsIndexes,
      columns: [
        { name: 'id', type: eventId, using: event },
        { name: 'test_endpoint_id', type: toUuid ? 'uuid' : 'text', using: endpoint },
      ],
      bound: event,
    },
    receipts: {
      name: 'receipts',
      create: receiptsTable(eventId),
      indexes: receiptsIndexes,
      columns: [{ name: 'event_id', type: eventId, using: event }],
      bound: event,
    },
  };
}

/** Columns holding event ids outside the partitioned tables, and their type before this migration. */
const others = [
  ['deliveries', 'event_id', 'text COLLATE "C"'],
  ['event_keys', 'event_id', 'text'],
  ['messages', 'last_event_id', 'text'],
] as const;

async function dropDependents(knex: Knex, evt: 'text' | 'uuid'): Promise<void> {
  for (const signature of signatures(evt)) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('ALTER TABLE receipts DROP CONSTRAINT receipts_event_id_fkey');
  await knex.raw('ALTER TABLE events DROP CONSTRAINT events_source_id_fkey, DROP CONSTRAINT events_tenant_id_fkey');
  await knex.raw('ALTER SEQUENCE events_seq_seq OWNED BY NONE');
}

async function addDependents(knex: Knex): Promise<void> {
  await knex.raw('ALTER SEQUENCE events_seq_seq OWNED BY events.seq');
  await knex.raw('ALTER TABLE events ADD CONSTRAINT events_source_id_fkey FOREIGN KEY (source_id) REFERENCES sources(id) ON DELETE CASCADE');
  await knex.raw('ALTER TABLE events ADD CONSTRAINT events_tenant_id_fkey FOREIGN KEY (tenant_id) REFERENCES tenants(id) ON DELETE CASCADE');
  await knex.raw('ALTER TABLE receipts ADD CONSTRAINT receipts_event_id_fkey FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE');
}

export async function up(knex: Knex): Promise<void> {
  await dropDependents(knex, 'text');
  const { events, receipts } = tables('uuid');
  await rebuildPartitioned(knex, events);
  await rebuildPartitioned(knex, receipts);
  for (const [table, column] of others) await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE uuid USING ${typeidToUuid(column)}`);
  await addDependents(knex);
  await knex.raw(`UPDATE partition_plan SET key_type = 'uuid' WHERE table_name IN ('events', 'receipts')`);
}

/**
 * `event_body(events)` goes with the table's row type, and migration 20261204000044's down calls
 * it to give every event its body back: with the function there (`migrate` applied it), the
 * bodies are given back here, before it goes, as that down would have.
 */
export async function down(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ present: boolean }> }>("SELECT to_regprocedure('event_body(events)') IS NOT NULL AS present");
  if (rows[0]!.present) await knex.raw('UPDATE events e SET body = event_body(e) WHERE body IS NULL');
  await dropDependents(knex, 'uuid');
  const { events, receipts } = tables('text');
  await rebuildPartitioned(knex, events);
  await rebuildPartitioned(knex, receipts);
  for (const [table, column, type] of others) await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE ${type} USING ${uuidToTypeid('evt', column)}`);
  await addDependents(knex);
  await knex.raw(`UPDATE partition_plan SET key_type = 'typeid' WHERE table_name IN ('events', 'receipts')`);
}
