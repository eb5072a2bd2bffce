import type { Knex } from 'knex';

/**
 * Storage per event, index by index (bench `storage`, docs/performance.md):
 *
 * - Listing indexes were declared `id DESC`. Ids grow with time, so every new entry went to the
 *   left end of its tenant's (or endpoint's) range, where B-tree page splits leave both halves half
 *   empty: those indexes took about twice their size. Ascending, new entries go to the right end,
 *   pages fill up, and `ORDER BY id DESC` reads the same index backwards.
 * - deliveries_tenant_status (tenant, status, id) got a new entry in the middle of the index on every
 *   status change, with the same half-empty splits: the largest single structure, ~1 KB per event of
 *   two deliveries. Listing by status is served instead by deliveries_tenant with a filter for
 *   succeeded (nearly every row), by deliveries_dead for dead, and by a partial index of the few
 *   deliveries still waiting or in flight, whose entries vacuum removes once they finish.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX events_tenant_created, events_tenant_type, deliveries_tenant, deliveries_tenant_status, deliveries_endpoint,
               deliveries_dead, audit_log_tenant, replays_tenant;
    CREATE INDEX events_tenant_created ON events (tenant_id, id);
    CREATE INDEX events_tenant_type ON events (tenant_id, type, id);
    CREATE INDEX deliveries_tenant ON deliveries (tenant_id, id);
    CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id);
    CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_reason, id) WHERE status = 'dead';
    CREATE INDEX deliveries_unfinished ON deliveries (tenant_id, id) WHERE status IN ('pending', 'queued', 'in_flight');
    CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id);
    CREATE INDEX replays_tenant ON replays (tenant_id, id);
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP INDEX events_tenant_created, events_tenant_type, deliveries_tenant, deliveries_unfinished, deliveries_endpoint,
               deliveries_dead, audit_log_tenant, replays_tenant;
    CREATE INDEX events_tenant_created ON events (tenant_id, id DESC);
    CREATE INDEX events_tenant_type ON events (tenant_id, type, id DESC);
    CREATE INDEX deliveries_tenant ON deliveries (tenant_id, id DESC);
    CREATE INDEX deliveries_tenant_status ON deliveries (tenant_id, status, id DESC);
    CREATE INDEX deliveries_endpoint ON deliveries (endpoint_id, id DESC);
    CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_reason, id DESC) WHERE status = 'dead';
    CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id DESC);
    CREATE INDEX replays_tenant ON replays (tenant_id, id DESC);
  `);
}
