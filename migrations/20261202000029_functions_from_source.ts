import type { Knex } from 'knex';

/**
 * SQL functions live in db/functions/<function name>.sql from now on, one file each, applied by
 * `migrate` after the versioned migrations whenever a file's checksum differs from the one recorded
 * here (src/infra/function-sources.ts). Versioned migrations hold tables, indexes and data only.
 *
 * On a fresh install the migrations before this one still create older versions of the functions;
 * the files then replace them. Down forgets what was applied, so the next `migrate` applies every
 * file again; it does not put back earlier function text (docs/operations/functions.md).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('schema_functions', (t) => {
    t.text('name').primary();
    t.text('checksum').notNullable();
    t.timestamp('applied_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('schema_functions');
}
