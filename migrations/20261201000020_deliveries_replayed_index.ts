import type { Knex } from 'knex';

/**
 * Endpoint statistics (GET /v1/endpoints/:id/stats) find the deliveries that can have attempts in
 * a window by id range, since an id says when the delivery was made; a delivery made earlier and
 * replayed since is the exception, found here. Partial: only replayed deliveries are in it, so it
 * costs nothing on the insert and status updates of every other delivery.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX deliveries_replayed ON deliveries (endpoint_id, replayed_at) WHERE replayed_at IS NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP INDEX deliveries_replayed');
}
