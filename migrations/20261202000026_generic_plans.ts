import type { Knex } from 'knex';

/**
 * A new callback was planned, not just executed, four times over: `fan_out_targets` once (a custom
 * plan on every call, migration 20261201000013), and each foreign-key check into the partitioned
 * `events` table (two deliveries and the receipt). PostgreSQL plans such a check for the key it is
 * given as long as that plan looks cheaper than the generic one, and for a partitioned table it
 * always does: the custom plan names one partition, the generic one all of them with run-time
 * pruning. Planning was a quarter of PostgreSQL's CPU per callback (bench `intake`, profiled).
 *
 * - The intake and publish functions, and the statement that records repeats, plan generically:
 *   the setting holds for everything they run, foreign-key checks included. The generic check
 *   still reads only the event's partition (run-time pruning).
 * - `fan_out_targets` plans generically too, with sequential scans priced out, so its one plan is
 *   the `endpoints_tenant` index whatever the statistics say about the tenants: what the custom plan
 *   was there for (a tenant owning nearly every endpoint makes a generic plan expect most of the
 *   table for any tenant and scan it).
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`ALTER FUNCTION fan_out_targets(text, text) SET plan_cache_mode = force_generic_plan SET enable_seqscan = off`);
  await knex.raw(`ALTER FUNCTION intake_accept_many(jsonb, integer) SET plan_cache_mode = force_generic_plan`);
  await knex.raw(`ALTER FUNCTION publish_event(${publishEventArgs}) SET plan_cache_mode = force_generic_plan`);
  await knex.raw(`
    CREATE FUNCTION intake_record_repeats(p_receipt_ids text[], p_tenant_ids text[], p_source_ids text[], p_origins text[], p_digests text[])
    RETURNS TABLE (id text, event_id text)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
    BEGIN
      -- A repeat is recorded against the event its first receipt names; a digest without any
      -- receipt (gone with its retention window) gets no row, and the caller takes it as new.
      RETURN QUERY
      INSERT INTO receipts AS n (id, tenant_id, source_id, event_id, outcome, origin, body_digest)
      SELECT i.receipt_id, i.tenant_id, i.source_id, r.event_id, 'duplicate', i.origin, i.body_digest
        FROM unnest(p_receipt_ids, p_tenant_ids, p_source_ids, p_origins, p_digests)
             AS i(receipt_id, tenant_id, source_id, origin, body_digest)
       CROSS JOIN LATERAL (SELECT f.event_id FROM receipts f
                            WHERE f.source_id = i.source_id AND f.body_digest = i.body_digest LIMIT 1) r
      RETURNING n.id, n.event_id;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION intake_record_repeats(text[], text[], text[], text[], text[])');
  await knex.raw(`ALTER FUNCTION publish_event(${publishEventArgs}) RESET plan_cache_mode`);
  await knex.raw('ALTER FUNCTION intake_accept_many(jsonb, integer) RESET plan_cache_mode');
  await knex.raw('ALTER FUNCTION fan_out_targets(text, text) RESET ALL');
  await knex.raw('ALTER FUNCTION fan_out_targets(text, text) SET plan_cache_mode = force_custom_plan');
}

const publishEventArgs = 'text, text[], text, text, text, text, text, text, text, timestamptz, integer';
