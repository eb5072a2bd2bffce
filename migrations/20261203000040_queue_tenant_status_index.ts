import type { Knex } from 'knex';

/**
 * delivery_queue's tenant index keys (tenant_id, status) instead of (tenant_id, delivery_id).
 *
 * It serves one read, a tenant's listing of its unfinished deliveries in one status. Holding
 * delivery_id, it could also answer "these delivery ids" with a scan of the whole index, and the
 * queue's trigger took that plan whenever the statistics counted a few rows in a large table (a
 * vacuum of the queue during a large insert leaves them so): 30-75 ms per recorded batch with a
 * 100,000-delivery backlog (docs/performance.md, "Backlogs yield to live work"). Without
 * delivery_id, only the primary key answers a look-up by id. The queue holds only unfinished
 * deliveries, so building the index inside the migration's transaction blocks its writes briefly.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX delivery_queue_tenant_status ON delivery_queue (tenant_id, status)');
  await knex.raw('DROP INDEX delivery_queue_tenant');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX delivery_queue_tenant ON delivery_queue (tenant_id, delivery_id)');
  await knex.raw('DROP INDEX delivery_queue_tenant_status');
}
