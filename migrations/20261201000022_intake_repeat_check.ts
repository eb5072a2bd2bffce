import type { Knex } from 'knex';
import { intakeAcceptClaimingKeys } from './20261201000016_claim_event_keys.js';

/**
 * intake_accept answers a byte-identical repeat itself (the receipts_source_digest look-up that
 * used to be a statement of its own, sent before every new callback), so accepting a new callback
 * is one round trip. A repeat the process recognises from its own recent digests still takes the
 * cheaper receipt-only statement, without parsing the body (src/inbound/intake-service.ts).
 * Everything after the check is as migration 20261201000016 left it.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE OR REPLACE FUNCTION intake_accept(
      p_receipt_id text, p_event_id text, p_delivery_ids text[],
      p_tenant_id text, p_source_id text, p_origin text, p_body_digest text, p_received_at timestamptz,
      p_type text, p_message_id text, p_dedupe_key text,
      p_status text, p_status_rank integer, p_status_final boolean, p_provider_sequence bigint,
      p_body text, p_default_max_age_seconds integer,
      OUT outcome text, OUT event_id text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      v_targets fan_out_target[];
      v_inserted text;
      v_advanced integer := 0;
    BEGIN
      pending := 0;
      dead_disabled := 0;
      endpoint_count := 0;

      -- A byte-identical repeat of a body this source already sent: the same event, no work, one
      -- receipt. Checked here rather than in a statement of its own, so a new callback costs one
      -- round trip. Two identical bodies racing each other both miss this and meet on the key below.
      SELECT r.event_id INTO event_id FROM receipts r
       WHERE r.source_id = p_source_id AND r.body_digest = p_body_digest LIMIT 1;
      IF event_id IS NOT NULL THEN
        outcome := 'duplicate';
        INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
        VALUES (p_receipt_id, p_tenant_id, p_source_id, event_id, outcome, p_origin, p_body_digest, p_received_at);
        RETURN;
      END IF;

      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets := fan_out_targets(p_tenant_id, p_type);
      endpoint_count := cardinality(v_targets);
      IF endpoint_count > cardinality(p_delivery_ids) THEN
        outcome := 'need_ids';
        RETURN;
      END IF;

      -- The key is claimed first: a concurrent callback with the same key waits here for ours to
      -- commit or roll back, then finds the key taken (or takes it).
      INSERT INTO event_keys (scope_id, key, event_id) VALUES (p_source_id, p_dedupe_key, p_event_id)
      ON CONFLICT DO NOTHING
      RETURNING event_keys.event_id INTO v_inserted;

      IF v_inserted IS NULL THEN
        -- The same logical event was already stored (possibly by a callback that committed while we
        -- waited on its key): answer with that event, create no work.
        outcome := 'duplicate';
        SELECT k.event_id INTO event_id FROM event_keys k WHERE k.scope_id = p_source_id AND k.key = p_dedupe_key;
      ELSE
        INSERT INTO events (id, tenant_id, source_id, origin, type, message_id, dedupe_key, status, status_rank,
                            provider_sequence, body, created_at)
        VALUES (p_event_id, p_tenant_id, p_source_id, p_origin, p_type, p_message_id, p_dedupe_key, p_status, p_status_rank,
                p_provider_sequence, p_body, p_received_at);
        event_id := v_inserted;
        IF p_message_id IS NOT NULL THEN
          -- The message's status only moves forward: a status of lower or equal rank than the one the
          -- message has reached changes nothing. An event without a status always updates the row.
          -- Either way a row that is written stays locked until commit (see fan_out_insert).
          INSERT INTO messages AS m (tenant_id, source_id, message_id, status, status_rank, status_final, last_event_id, updated_at)
          VALUES (p_tenant_id, p_source_id, p_message_id, p_status, coalesce(p_status_rank, 0), coalesce(p_status_final, false),
                  v_inserted, now())
          ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE
             SET status = COALESCE(EXCLUDED.status, m.status),
                 status_rank = GREATEST(EXCLUDED.status_rank, m.status_rank),
                 status_final = CASE WHEN EXCLUDED.status IS NULL THEN m.status_final ELSE EXCLUDED.status_final END,
                 last_event_id = EXCLUDED.last_event_id,
                 updated_at = now()
           WHERE EXCLUDED.status IS NULL OR m.status_rank < EXCLUDED.status_rank;
          GET DIAGNOSTICS v_advanced = ROW_COUNT;
        END IF;

        IF p_status IS NOT NULL AND p_message_id IS NOT NULL AND v_advanced = 0 THEN
          -- Older than what the message already reached: kept as evidence, forwarded to nobody.
          outcome := 'stale';
          UPDATE events SET stale = true WHERE id = v_inserted;
        ELSE
          outcome := 'accepted';
          SELECT f.pending, f.dead_disabled INTO pending, dead_disabled
            FROM fan_out_insert(v_inserted, p_tenant_id, p_received_at,
                                CASE WHEN p_message_id IS NOT NULL THEN p_source_id || ':' || p_message_id END,
                                p_provider_sequence, p_default_max_age_seconds, v_targets, p_delivery_ids) f;
        END IF;
      END IF;

      INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
      VALUES (p_receipt_id, p_tenant_id, p_source_id, event_id, outcome, p_origin, p_body_digest, p_received_at);
    END
    $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(intakeAcceptClaimingKeys);
}
