import type { Knex } from 'knex';

/**
 * attempts.tenant_id may be NULL: new attempts no longer store it. An attempt's tenant is its
 * delivery's, and every read of attempts already goes through its delivery (TenantScope filters
 * attempts by their delivery's tenant). The 31-byte id was a fifth of an attempt's row, and a day's
 * attempts are what retention's partition drop truncates (docs/performance.md, "Publishing a batch
 * set-based").
 *
 * Expand step: release 0.1.0's functions still write the column while its processes run. The
 * column goes in a later release, once nothing writes it (docs/operations/functions.md).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE attempts ALTER COLUMN tenant_id DROP NOT NULL');
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('UPDATE attempts a SET tenant_id = d.tenant_id FROM deliveries d WHERE d.id = a.delivery_id AND a.tenant_id IS NULL');
  await knex.raw('ALTER TABLE attempts ALTER COLUMN tenant_id SET NOT NULL');
}
