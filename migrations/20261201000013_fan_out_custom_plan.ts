import type { Knex } from 'knex';

/**
 * `fan_out_targets` looks up the endpoints of one tenant. When one tenant owns most endpoints (say
 * 100,000 of them), the statistics see few distinct tenants, and a generic plan, which does not
 * look at the tenant it is given, expects most of the table and scans all of it: 15 ms per event
 * of every other tenant at 100,000 (bench `scale`). A SQL-language function's statement is always
 * planned generically, so the function becomes PL/pgSQL, planned for the actual tenant on every
 * call: a small tenant's endpoints then come from the `endpoints_tenant` index.
 */
/** Migration 20261129000011's body, to the byte, so that down restores exactly that function. */
const targets = `
      SELECT coalesce(array_agg(ROW(e.id, e.status = 'active', e.ordering = 'per-message',
                                    (e.retry_policy->>'maxEventAgeSeconds')::int)::fan_out_target ORDER BY e.id),
                      '{}')
        FROM endpoints e
       WHERE e.tenant_id = p_tenant_id AND e.deleted_at IS NULL
         AND ((cardinality(e.event_types) = 0 AND NOT starts_with(p_type, 'platform.'))
              OR p_type = ANY(e.event_types)
              OR EXISTS (SELECT 1 FROM unnest(e.event_types) f WHERE right(f, 2) = '.*' AND starts_with(p_type, left(f, -1))))
    `;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION fan_out_targets(p_tenant_id text, p_type text) RETURNS fan_out_target[]
    LANGUAGE plpgsql STABLE SET plan_cache_mode = force_custom_plan AS $$
    BEGIN
      RETURN (${targets});
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION fan_out_targets(p_tenant_id text, p_type text) RETURNS fan_out_target[]
    LANGUAGE sql STABLE AS $$${targets}$$;
  `);
}
