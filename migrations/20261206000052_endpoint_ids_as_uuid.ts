import type { Knex } from 'knex';

/**
 * Endpoint ids are stored as `uuid`, the 128 bits their TypeID encodes, instead of the TypeID's
 * 31 bytes of text (docs/architecture.md, "Ids in the database"): in `endpoints`, `deliveries` and
 * `delivery_queue`, with the foreign key between the first two and the `fan_out_target` type the
 * fan-out passes endpoints in. The stores convert at their boundary; the API keeps TypeIDs.
 *
 * Not converted here: `events.test_endpoint_id` (a column nearly always NULL, converted when
 * `events` itself is), `portal_sessions.endpoint_ids` and `audit_log.target_id`, which hold
 * TypeIDs as the API wrote them and are never joined to an endpoint in SQL.
 *
 * A column's type cannot change under a rolling deploy: this release does not run beside the
 * previous one (docs/operations/upgrade.md). Each table named is rewritten under an exclusive lock.
 * The functions whose arguments or results change type are dropped here; `migrate` then applies
 * their files. The conversions are SQL expressions, not functions: migrations hold no function text.
 */

const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
/** One placeholder per letter, none of them a digit, so replacing them one at a time is safe. */
const placeholders = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&*';

/**
 * The uuid a TypeID column encodes: each of its 26 letters becomes its 5 bits, and the 128 bits
 * after the first two of the 130 are cast in two 64-bit halves.
 */
function typeidToUuid(column: string): string {
  let bits = `translate(right(${column}, 26), '${alphabet}', '${placeholders}')`;
  for (let i = 0; i < 32; i++) bits = `replace(${bits}, '${placeholders[i]}', '${i.toString(2).padStart(5, '0')}')`;
  const half = (from: number) => `lpad(to_hex(substring((${bits})::bit(130) FROM ${from} FOR 64)::int8), 16, '0')`;
  return `(${half(3)} || ${half(67)})::uuid`;
}

/** The TypeID with this prefix that a uuid column encodes: 3 bits, then 25 groups of 5. */
function uuidToTypeid(prefix: string, column: string): string {
  const hex = (side: 'left' | 'right') => `('x' || ${side}(replace(${column}::text, '-', ''), 16))::bit(64)::int8`;
  const h = hex('left');
  const l = hex('right');
  const letter = (expr: string) => `substr('${alphabet}', ((${expr}) + 1)::int, 1)`;
  const letters = [letter(`(${h} >> 61) & 7`)];
  for (let i = 2; i <= 13; i++) letters.push(letter(`(${h} >> ${61 - 5 * (i - 1)}) & 31`));
  letters.push(letter(`((${h} & 1) << 4) | ((${l} >> 60) & 15)`));
  for (let i = 15; i <= 26; i++) letters.push(letter(`(${l} >> ${60 - 5 * (i - 14)}) & 31`));
  return `CASE WHEN ${column} IS NOT NULL THEN '${prefix}_' || ${letters.join(' || ')} END`;
}

const tz = 'timestamp with time zone';
/**
 * Every function whose arguments or results hold an endpoint id, by its arguments before this
 * migration (`text`) and after (`uuid`). Dropped on the way up and on the way down alike: PostgreSQL
 * replaces no function's result type, and either release's `migrate` applies its own files.
 */
const signatures = (ep: 'text' | 'uuid') => [
  'admit_due_v4(integer, integer, integer, integer, integer, boolean)',
  'claim_delivery(text, text, integer)',
  `hand_off_v4(${ep}[], integer[], integer, integer)`,
  `next_due(${ep}, integer, integer, boolean)`,
  `endpoint_room(${ep}, integer, integer, boolean)`,
  'pending_endpoints()',
  `endpoint_health_after_attempts(${ep}[], boolean, integer, integer)`,
  `record_attempt_v4(text, integer, text, ${tz}, text, integer, text, text, text, text, ${tz}, integer, text, text, text, text, ${ep}, boolean, integer, integer, integer, bigint)`,
  `record_successes_v4(text[], integer[], text[], text[], text[], ${tz}[], integer[], integer[], text[], ${ep}[], boolean[], integer, integer, bigint[])`,
];

const columns = [
  ['endpoints', 'id'],
  ['deliveries', 'endpoint_id'],
  ['delivery_queue', 'endpoint_id'],
] as const;

export async function up(knex: Knex): Promise<void> {
  for (const signature of signatures('text')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_id_fkey');
  for (const [table, column] of columns) {
    await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE uuid USING ${typeidToUuid(column)}`);
  }
  await knex.raw('ALTER TYPE fan_out_target ALTER ATTRIBUTE endpoint_id TYPE uuid');
  await knex.raw('ALTER TABLE deliveries ADD CONSTRAINT deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) ON DELETE CASCADE');
}

export async function down(knex: Knex): Promise<void> {
  for (const signature of signatures('uuid')) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex.raw('ALTER TABLE deliveries DROP CONSTRAINT deliveries_endpoint_id_fkey');
  for (const [table, column] of columns) {
    await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${column} TYPE text USING ${uuidToTypeid('ep', column)}`);
  }
  await knex.raw('ALTER TYPE fan_out_target ALTER ATTRIBUTE endpoint_id TYPE text');
  await knex.raw('ALTER TABLE deliveries ADD CONSTRAINT deliveries_endpoint_id_fkey FOREIGN KEY (endpoint_id) REFERENCES endpoints(id) ON DELETE CASCADE');
}
