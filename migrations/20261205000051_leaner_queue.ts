import type { Knex } from 'knex';

/**
 * delivery_queue takes less room at a backlog's peak, where its pages stay (docs/performance.md,
 * "A leaner queue"):
 *
 * - `delivery_queue_due` is keyed by (endpoint_id, next_attempt_at) without delivery_id. Nothing
 *   needs the id's order among deliveries due at the same instant; without it each entry is 32
 *   bytes narrower, and deliveries due at the same instant share one deduplicated entry.
 * - `fillfactor` 100 instead of 80. A queue row's updates change `status`, which the partial
 *   indexes' predicates name, so none of them is HOT; the fifth of every page kept for them only
 *   placed a new version beside its old one.
 *
 * The index is built concurrently beside the old one and takes its name once the old one is
 * dropped, so the queue keeps taking writes and every function's plan finds an index of that name.
 * The previous release's statements still order by (next_attempt_at, delivery_id): on this index
 * they sort one endpoint's due entries, and return the same rows. Each step can be run again after
 * a failure: an index a failed concurrent build left invalid is dropped and built again.
 */
export const config = { transaction: false };

async function rebuildDueIndex(knex: Knex, columns: string): Promise<void> {
  const { rows: invalid } = await knex.raw<{ rows: unknown[] }>(
    `SELECT 1 FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
      WHERE c.relname = 'delivery_queue_due_next' AND c.relnamespace = current_schema()::regnamespace AND NOT x.indisvalid`,
  );
  if (invalid.length > 0) await knex.raw('DROP INDEX CONCURRENTLY delivery_queue_due_next');
  await knex.raw(`CREATE INDEX CONCURRENTLY IF NOT EXISTS delivery_queue_due_next ON delivery_queue (${columns}) WHERE status = 'pending'`);
  await knex.raw('DROP INDEX CONCURRENTLY IF EXISTS delivery_queue_due');
  await knex.raw('ALTER INDEX delivery_queue_due_next RENAME TO delivery_queue_due');
}

export async function up(knex: Knex): Promise<void> {
  await rebuildDueIndex(knex, 'endpoint_id, next_attempt_at');
  await knex.raw('ALTER TABLE delivery_queue SET (fillfactor = 100)');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE delivery_queue SET (fillfactor = 80)');
  await rebuildDueIndex(knex, 'endpoint_id, next_attempt_at, delivery_id');
}
