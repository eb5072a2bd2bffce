import type { Knex } from 'knex';

/**
 * A delivery's and a receipt's tenant (and a receipt's source) are always their event's: intake and
 * publishing write them from the same values in the same statement. Their own foreign keys checked
 * again what the event's keys had just checked, on every row (four of a callback's fifteen checks,
 * each a look-up with its own executor start), and deleting a tenant or a source already removes
 * these rows through their event (`ON DELETE CASCADE` from events to deliveries and receipts).
 * The event's keys stay, and so do the keys whose rows have no event to go through: messages,
 * endpoints, sources, API keys.
 */
const guarded = [
  { table: 'deliveries', column: 'tenant_id', references: 'tenants' },
  { table: 'receipts', column: 'tenant_id', references: 'tenants' },
  { table: 'receipts', column: 'source_id', references: 'sources' },
];

export async function up(knex: Knex): Promise<void> {
  for (const g of guarded) await knex.raw(`ALTER TABLE ${g.table} DROP CONSTRAINT ${g.table}_${g.column}_fkey`);
}

export async function down(knex: Knex): Promise<void> {
  for (const g of guarded) {
    await knex.raw(
      `ALTER TABLE ${g.table} ADD CONSTRAINT ${g.table}_${g.column}_fkey FOREIGN KEY (${g.column}) REFERENCES ${g.references}(id) ON DELETE CASCADE`,
    );
  }
}
