import type { Knex } from 'knex';

/**
 * A partitioned table whose partition key changes type, as a migration rebuilds it
 * (rebuildPartitioned).
 */
export interface PartitionedTable {
  /** The parent's name. */
  name: string;
  /** The parent as it stands after the change: CREATE TABLE … PARTITION BY RANGE (key). */
  create: string;
  /**
   * Its primary key and indexes, made on the empty parent before the partitions are attached, so
   * that each partition's own (converted with it) is attached to them.
   */
  indexes: string[];
  /** Every column that changes type: its new type and the expression that converts it. */
  columns: Array<{ name: string; type: string; using: (column: string) => string }>;
  /** How a bound of a partition, as `partition_bounds` shows it, converts to the new key's type. */
  bound: (expression: string) => string;
}

/**
 * Moves every partition of a table to a new parent whose partition key is of another type:
 * PostgreSQL changes no partition key's type. A partition whose detach retention had begun is
 * finished and dropped, as retention's next run would have; the others are detached, converted
 * (one rewrite each, every changed column at once) and attached again on their bounds converted
 * the same way (the first partition may start at MINVALUE). The caller drops what depends on the
 * parent first (foreign keys to and from it, functions of its row type) and makes them again.
 */
export async function rebuildPartitioned(knex: Knex, table: PartitionedTable): Promise<void> {
  const { rows: pending } = await knex.raw<{ rows: Array<{ name: string }> }>(
    'SELECT name FROM partition_bounds WHERE parent = ? AND detach_pending',
    [table.name],
  );
  for (const { name } of pending) {
    await knex.raw('ALTER TABLE ?? DETACH PARTITION ?? FINALIZE', [table.name, name]);
    await knex.raw('DROP TABLE ??', [name]);
  }
  const { rows: partitions } = await knex.raw<{ rows: Array<{ name: string; lower: string | null; upper: string | null }> }>(
    `SELECT name, ${table.bound('lower_bound')}::text AS lower, ${table.bound('upper_bound')}::text AS upper
       FROM partition_bounds WHERE parent = ? ORDER BY name`,
    [table.name],
  );
  for (const { name } of partitions) await knex.raw('ALTER TABLE ?? DETACH PARTITION ??', [table.name, name]);
  await knex.raw('DROP TABLE ??', [table.name]);
  await knex.raw(table.create);
  for (const statement of table.indexes) await knex.raw(statement);
  const changes = table.columns.map((c) => `ALTER COLUMN ${c.name} TYPE ${c.type} USING ${c.using(c.name)}`).join(', ');
  const bound = (value: string | null, open: string) => (value === null ? open : knex.raw('?', [value]).toQuery());
  for (const { name, lower, upper } of partitions) {
    await knex.raw(`ALTER TABLE ?? ${changes}`, [name]);
    await knex.raw(`ALTER TABLE ?? ATTACH PARTITION ?? FOR VALUES FROM (${bound(lower, 'MINVALUE')}) TO (${bound(upper, 'MAXVALUE')})`, [table.name, name]);
  }
}
