import type { Knex } from 'knex';

/**
 * attempts.tenant_id may be NULL: the expand step of removing it. An attempt's tenant is its
 * delivery's, and from this release every read of attempts finds it there (TenantScope). The
 * writers still fill the column, because release 0.1.0's processes, which run beside this release
 * during a rolling deploy, read attempts by it. The release after this one stops writing it (a
 * change of its functions and sweeper, no migration), and the one after drops the column: the
 * 31-byte id is a fifth of an attempt's row, and a day of attempts is what retention's partition
 * drop truncates (docs/performance.md, "Publishing a batch set-based").
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE attempts ALTER COLUMN tenant_id DROP NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('UPDATE attempts a SET tenant_id = d.tenant_id FROM deliveries d WHERE d.id = a.delivery_id AND a.tenant_id IS NULL');
  await knex.raw('ALTER TABLE attempts ALTER COLUMN tenant_id SET NOT NULL');
}
