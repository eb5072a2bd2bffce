import type { Knex } from 'knex';

/**
 * An endpoint's own request headers and its content filter.
 * - headers_enc: the headers as a JSON object, sealed like secret_enc (bound to the endpoint id).
 * - filter: the filter as the tenant wrote it, numbers included digit for digit.
 * - filter_path: the filter compiled to a jsonpath predicate (src/domain/event-filter.ts), which
 *   fan_out_targets evaluates; held as jsonpath so fan-out never parses it again.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('endpoints', (t) => {
    t.text('headers_enc');
    t.text('filter');
    t.specificType('filter_path', 'jsonpath');
    t.check('(filter IS NULL) = (filter_path IS NULL)', [], 'endpoints_filter_compiled');
  });
}

/**
 * db/functions/fan_out_targets.sql adds an overload that reads filter_path, beside the signature
 * the migrations before this one know. The overload goes with the column: migration
 * 20261129000011's down drops fan_out_targets by name alone, which fails while two exist.
 */
export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION IF EXISTS fan_out_targets(text, text, text)');
  await knex.schema.alterTable('endpoints', (t) => {
    t.dropChecks('endpoints_filter_compiled');
    t.dropColumn('filter_path');
    t.dropColumn('filter');
    t.dropColumn('headers_enc');
  });
}
