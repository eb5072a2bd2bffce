import type { Knex } from 'knex';

/**
 * Contract step for the four signatures release 0.6.0 kept for release 0.5.0's processes
 * (docs/operations/functions.md): admit_due_v3, hand_off_v3, record_attempt_v3 and
 * record_successes_v3, which claim and record in `deliveries` only. Release 0.6.0 calls the `_v4`
 * (claims kept in the queue row) and none of these, and only it runs beside this release. Only
 * function sources created them (no released migration's down names them), their files are gone,
 * so their recorded checksums go too. `admit_due`, release 0.1.0's signature that released downs
 * drop, now wraps admit_due_v4.
 *
 * The down cannot bring these back (migrations hold no function text): a rollback to 0.6.0 runs
 * 0.6.0's `migrate`, which finds their sources unrecorded and applies them.
 */
const dropped = [
  'admit_due_v3(integer, integer, integer, integer, integer, boolean)',
  'hand_off_v3(text[], integer[], integer, integer)',
  'record_attempt_v3(text, integer, text, timestamptz, text, integer, text, text, text, text, timestamptz, integer, text, text, text, text, text, boolean, integer, integer, integer, bigint)',
  'record_successes_v3(text[], integer[], text[], text[], text[], timestamptz[], integer[], integer[], text[], text[], boolean[], integer, integer, bigint[])',
];
const files = ['admit_due_v3', 'hand_off_v3', 'record_attempt_v3', 'record_successes_v3'];

export async function up(knex: Knex): Promise<void> {
  for (const signature of dropped) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex('schema_functions').whereIn('name', files).delete();
}

export async function down(): Promise<void> {
  // Nothing to put back here: see above.
}
