import type { Knex } from 'knex';

/**
 * A test event (POST /v1/endpoints/:id/test) is stored as an event like any other, so a backfill of
 * another endpoint sent it on as a real one. `test_endpoint_id` names the endpoint a test event was
 * made for; it is NULL for every other event, and a backfill takes only those.
 *
 * Metadata only: a nullable column without a default rewrites no row, and NULL takes no byte (the
 * row's null bitmap has room for it). A process of release 0.4.0 writes no test_endpoint_id, so its
 * test events made during a rolling deploy may still be backfilled elsewhere.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN test_endpoint_id text');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events DROP COLUMN test_endpoint_id');
}
