import type { Knex } from 'knex';

/**
 * events.data: an event's payload without the envelope around it. The envelope's id, type, timestamp
 * and message id are columns already; db/functions/event_body.sql builds the body from them, byte
 * for byte as `body` stores it (~126 bytes per event stored twice).
 *
 * Expand step: release 0.3.0 reads every body through event_body and still writes `body`, which
 * release 0.2.0's processes read during a rolling deploy. The release after it writes `data` and
 * leaves `body` NULL (docs/operations/upgrade.md, "Which versions run side by side").
 *
 * Both changes are metadata only (no row is read or rewritten).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN data text, ALTER COLUMN body DROP NOT NULL');
}

/**
 * Gives every event without a stored body (written after release 0.3.0) its body back, as release
 * 0.2.0 reads it, with the function that sends it: `migrate` applied it, and `migrate:down` runs
 * from the same code or a later release's, with every process stopped (docs/operations/upgrade.md,
 * "Rollback"). Without the function (versioned migrations run alone) there is nothing to fill, or
 * SET NOT NULL refuses. The function goes with the column it reads: this release's functions that
 * call it fail until the older release's `migrate` applies its own files.
 */
export async function down(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ present: boolean }> }>("SELECT to_regprocedure('event_body(events)') IS NOT NULL AS present");
  if (rows[0]!.present) await knex.raw('UPDATE events e SET body = event_body(e) WHERE body IS NULL');
  await knex.raw('ALTER TABLE events ALTER COLUMN body SET NOT NULL, DROP COLUMN data');
  await knex.raw('DROP FUNCTION IF EXISTS event_body(events), event_body(text, text, text, timestamptz, text, text)');
  await knex('schema_functions').where('name', 'event_body').delete();
}
