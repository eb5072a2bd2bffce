import type { Knex } from 'knex';
import { typeidToUuid, uuidToTypeid } from './lib/typeid-sql.js';

/**
 * A row of `attempts` narrows by 24–33 bytes: a bare one (no error, no next attempt) from 126 bytes
 * on its page to 93, a typical retry (an error class and a next attempt) from 141 to 117
 * (docs/performance.md, "Narrower attempt rows"):
 * - `id` is stored as the `uuid` its TypeID encodes, the fifth kind after endpoint, delivery,
 *   tenant and event ids (docs/architecture.md, "Ids in the database");
 * - `trigger` and `outcome` are stored as codes, each word's 1-based place in its list
 *   (db/functions/attempt_triggers.sql and attempt_outcomes.sql, which only ever append);
 * - `status_code` as a `smallint`, as `deliveries.first_try_status_code` already is: kept as an
 *   `integer`, its two more bytes would push the row past an 8-byte boundary (96 instead of 88).
 *
 * `attempts` is partitioned by `delivery_id`, which does not change: one ALTER TABLE converts
 * every partition in place. A partition whose detach retention had begun is finished and dropped
 * first, as retention's next run would have done (ALTER TABLE would skip it).
 *
 * Like 20261206000052, this release does not run beside 0.6.0, and the functions whose arguments or
 * results change are dropped here for `migrate` to apply their files.
 */

const tz = 'timestamp with time zone';
/** Every function whose arguments or results hold an attempt's id or row, by the id's type before and after. */
const signatures = (att: 'text' | 'uuid') => [
  `record_attempt_v4(uuid, integer, text, ${tz}, text, integer, text, ${att}, text, text, ${tz}, integer, text, text, text, text, uuid, boolean, integer, integer, integer, bigint)`,
  `record_successes_v4(uuid[], integer[], ${att}[], text[], text[], ${tz}[], integer[], integer[], text[], uuid[], boolean[], integer, integer, bigint[])`,
  'delivery_attempts(uuid)',
];

/** The words as their codes were first given: a code never changes meaning. */
const triggers = ['initial', 'retry', 'replay'];
const outcomes = ['success', 'retry', 'terminal'];
const toCode = (column: string, words: string[]) => `CASE ${column} ${words.map((w, i) => `WHEN '${w}' THEN ${i + 1}`).join(' ')} END`;
const toWord = (column: string, words: string[]) => `(ARRAY[${words.map((w) => `'${w}'`).join(', ')}])[${column}]`;
const inList = (column: string, words: string[]) => `CHECK (${column} IN (${words.map((w) => `'${w}'`).join(', ')}))`;

async function dropDetachPending(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ name: string }> }>("SELECT name FROM partition_bounds WHERE parent = 'attempts' AND detach_pending");
  for (const { name } of rows) {
    await knex.raw('ALTER TABLE attempts DETACH PARTITION ?? FINALIZE', [name]);
    await knex.raw('DROP TABLE ??', [name]);
  }
}

export async function up(knex: Knex): Promise<void> {
  for (const signature of signatures('text')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await dropDetachPending(knex);
  await knex.raw(`
    ALTER TABLE attempts
      DROP CONSTRAINT attempts_trigger_check,
      DROP CONSTRAINT attempts_outcome_check,
      ALTER COLUMN id TYPE uuid USING ${typeidToUuid('id')},
      ALTER COLUMN trigger TYPE smallint USING ${toCode('trigger', triggers)},
      ALTER COLUMN status_code TYPE smallint,
      ALTER COLUMN outcome TYPE smallint USING ${toCode('outcome', outcomes)},
      ADD CONSTRAINT attempts_trigger_check CHECK (trigger BETWEEN 1 AND ${triggers.length}),
      ADD CONSTRAINT attempts_outcome_check CHECK (outcome BETWEEN 1 AND ${outcomes.length})`);
}

export async function down(knex: Knex): Promise<void> {
  for (const signature of signatures('uuid')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('DROP FUNCTION IF EXISTS attempt_triggers()');
  await knex.raw('DROP FUNCTION IF EXISTS attempt_outcomes()');
  await dropDetachPending(knex);
  await knex.raw(`
    ALTER TABLE attempts
      DROP CONSTRAINT attempts_trigger_check,
      DROP CONSTRAINT attempts_outcome_check,
      ALTER COLUMN id TYPE text USING ${uuidToTypeid('att', 'id')},
      ALTER COLUMN trigger TYPE text USING ${toWord('trigger', triggers)},
      ALTER COLUMN status_code TYPE integer,
      ALTER COLUMN outcome TYPE text USING ${toWord('outcome', outcomes)},
      ADD CONSTRAINT attempts_trigger_check ${inList('trigger', triggers)},
      ADD CONSTRAINT attempts_outcome_check ${inList('outcome', outcomes)}`);
}
