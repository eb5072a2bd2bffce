import type { Knex } from 'knex';

/**
 * Contract step for the four signatures release 0.5.0 kept for release 0.4.0's processes
 * (docs/operations/functions.md): admit_due_v2, hand_off_v2, record_attempt_v2 and
 * record_successes_v2, wrappers over their `_v3` that carried no claim token. Release 0.5.0 calls
 * none of them, and only it runs beside this release. Only function sources created them (no
 * released migration's down names them), their files are gone, so their recorded checksums go too.
 *
 * The down cannot bring these back (migrations hold no function text): a rollback to 0.5.0 runs
 * 0.5.0's `migrate`, which finds their sources unrecorded and applies them.
 */
const dropped = [
  'admit_due_v2(integer, integer, integer, integer, integer, boolean)',
  'hand_off_v2(text[], integer[], integer, integer)',
  'record_attempt_v2(text, integer, text, timestamptz, text, integer, text, text, text, text, timestamptz, integer, text, text, text, text, text, boolean, integer, integer, integer)',
  'record_successes_v2(text[], integer[], text[], text[], text[], timestamptz[], integer[], integer[], text[], text[], boolean[], integer, integer)',
];
const files = ['admit_due_v2', 'hand_off_v2', 'record_attempt_v2', 'record_successes_v2'];

export async function up(knex: Knex): Promise<void> {
  for (const signature of dropped) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex('schema_functions').whereIn('name', files).delete();
}

export async function down(): Promise<void> {
  // Nothing to put back here: see above.
}
