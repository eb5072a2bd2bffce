import type { Knex } from 'knex';

/**
 * attempts is found by delivery_id through a plain index instead of the primary key
 * (delivery_id, id).
 *
 * Every read of attempts is "the attempts of these deliveries" (listings, stats, the cascade from
 * deliveries); none looks an attempt up by its id, and ids are generated unique. Without the id in
 * the key, a delivery's attempts share one deduplicated index entry: the index is ~40 % smaller
 * per attempt on the first try and a tenth for a retried delivery's, and dropping a day's partition
 * (retention) truncates that much less (docs/performance.md, "Attempts by delivery").
 *
 * Built per partition with CREATE INDEX CONCURRENTLY and attached to an index on the parent, so a
 * large table keeps taking attempts while it builds; hence no transaction. Each step can be run
 * again after a failure: a partition whose index is already attached is skipped, and an index a
 * failed concurrent build left invalid is dropped and built again.
 */
export const config = { transaction: false };

export async function up(knex: Knex): Promise<void> {
  await knex.raw('CREATE INDEX IF NOT EXISTS attempts_delivery ON ONLY attempts (delivery_id)');
  const { rows: partitions } = await knex.raw<{ rows: Array<{ name: string; attached: boolean }> }>(`
    SELECT c.relname AS name,
           EXISTS (SELECT 1 FROM pg_inherits ii JOIN pg_index x ON x.indexrelid = ii.inhrelid
                    WHERE ii.inhparent = 'attempts_delivery'::regclass AND x.indrelid = c.oid) AS attached
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'attempts'::regclass
     ORDER BY 1`);
  for (const { name, attached } of partitions) {
    if (attached) continue;
    const index = `${name}_delivery_id_idx`;
    const { rows: invalid } = await knex.raw<{ rows: unknown[] }>(
      `SELECT 1 FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
        WHERE c.relname = ? AND c.relnamespace = current_schema()::regnamespace AND NOT x.indisvalid`,
      [index],
    );
    if (invalid.length > 0) await knex.raw('DROP INDEX CONCURRENTLY ??', [index]);
    await knex.raw('CREATE INDEX CONCURRENTLY IF NOT EXISTS ?? ON ?? (delivery_id)', [index, name]);
    await knex.raw('ALTER INDEX attempts_delivery ATTACH PARTITION ??', [index]);
  }
  await knex.raw('ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_pkey');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (delivery_id, id)');
  await knex.raw('DROP INDEX attempts_delivery');
}
