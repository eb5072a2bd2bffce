import type { Knex } from 'knex';

/**
 * Contract step for three signatures release 0.2.0 kept for release 0.1.0's processes
 * (docs/operations/functions.md): hand_off, record_attempt and record_successes, wrappers over their
 * `_v2`. Release 0.2.0 calls none of them, and only it runs beside this release. Their files are
 * gone, so their recorded checksums go too.
 *
 * admit_due, publish_event's 0.1.0 signature and fan_out_targets(text, text) stay: released
 * migrations created them and their down steps alter them by signature (see their files).
 *
 * The down cannot bring these back (migrations hold no function text): a rollback to 0.2.0 runs
 * 0.2.0's `migrate`, which finds their sources unrecorded and applies them.
 */
const dropped = [
  'hand_off(text[], integer[], integer, integer)',
  'record_attempt(text, integer, text, timestamptz, text, integer, text, text, text, text, timestamptz, integer, text, text, text, text, text, boolean, integer, integer, integer)',
  'record_successes(text[], integer[], text[], text[], text[], timestamptz[], integer[], integer[], text[], text[], boolean[], integer, integer)',
];
const files = ['hand_off', 'record_attempt', 'record_successes'];

export async function up(knex: Knex): Promise<void> {
  for (const signature of dropped) await knex.raw(`DROP FUNCTION IF EXISTS ${signature}`);
  await knex('schema_functions').whereIn('name', files).delete();
}

export async function down(): Promise<void> {
  // Nothing to put back here: see above.
}
