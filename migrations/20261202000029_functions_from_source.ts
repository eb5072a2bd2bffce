import type { Knex } from 'knex';

/**
 * SQL functions live in db/functions/<function name>.sql from now on, one file each, applied by
 * `migrate` after the versioned migrations whenever a file's checksum differs from the one recorded
 * here (src/infra/function-sources.ts). Versioned migrations hold tables, indexes and data only.
 *
 * On a fresh install the migrations before this one still create older versions of the functions;
 * the files then replace them. Down forgets what was applied, so the next `migrate` applies every
 * file again; it does not put back earlier function text (docs/operations/functions.md). It drops
 * the functions that only files created, since no earlier migration's down knows them.
 */

/** The functions the migrations before this one create: history, fixed. */
const createdByEarlierMigrations = [
  'admit_due', 'delivery_queue_added', 'delivery_queue_changed', 'ensure_time_partitions', 'fan_out_insert',
  'fan_out_targets', 'fan_out_write', 'intake_accept_many', 'intake_record_repeats', 'lock_for_new_partition',
  'publish_event', 'typeid_floor', 'typeid_time',
];
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('schema_functions', (t) => {
    t.text('name').primary();
    t.text('checksum').notNullable();
    // The release whose file this was: an older release's process never puts back older text.
    t.text('release');
    t.timestamp('applied_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  const { rows } = await knex.raw<{ rows: Array<{ signature: string }> }>(
    `SELECT p.oid::regprocedure::text AS signature FROM pg_proc p
      WHERE p.pronamespace = current_schema()::regnamespace AND NOT (p.proname = ANY(:names))`,
    { names: createdByEarlierMigrations },
  );
  for (const { signature } of rows) await knex.raw(`DROP FUNCTION ${signature}`);
  await knex.schema.dropTable('schema_functions');
}
