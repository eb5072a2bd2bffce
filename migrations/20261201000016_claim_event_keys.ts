import type { Knex } from 'knex';
import { intakeAcceptFunction } from './20261129000011_intake_function.js';
import { publishEventFunction } from './20261129000012_publish_function.js';

/** intake_accept as this migration leaves it; migration 20261201000022 restores it on the way down. */
export const intakeAcceptClaimingKeys = `
    CREATE OR REPLACE FUNCTION intake_accept(
      p_receipt_id text, p_event_id text, p_delivery_ids text[],
      p_tenant_id text, p_source_id text, p_origin text, p_body_digest text, p_received_at timestamptz,
      p_type text, p_message_id text, p_dedupe_key text,
      p_status text, p_status_rank integer, p_status_final boolean, p_provider_sequence bigint,
      p_body text, p_default_max_age_seconds integer,
      OUT outcome text, OUT event_id text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type);
      v_inserted text;
      v_advanced integer := 0;
    BEGIN
      endpoint_count := cardinality(v_targets);
      pending := 0;
      dead_disabled := 0;
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
`;

/**
 * Intake and publishing claim their event's key in event_keys (migration 20261201000015) instead of
 * relying on a unique constraint on events, which a time-partitioned table can only have per
 * partition. Everything else in both functions is as before.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(intakeAcceptClaimingKeys);
  await knex.raw(`
    CREATE OR REPLACE FUNCTION publish_event(
      p_event_id text, p_delivery_ids text[], p_tenant_id text, p_origin text, p_type text, p_message_id text,
      p_idempotency_key text, p_request_hash text, p_body text, p_created_at timestamptz,
      p_default_max_age_seconds integer,
      OUT outcome text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer,
      OUT id text, OUT tenant_id text, OUT source_id text, OUT origin text, OUT type text, OUT message_id text,
      OUT status text, OUT stale boolean, OUT body text, OUT created_at timestamptz, OUT seq bigint,
      OUT request_hash text)
    LANGUAGE plpgsql AS $$
    DECLARE
      -- Read before anything is written, so that too few ids can be answered without writing.
      v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type);
      v_event events%ROWTYPE;
      v_claimed text;
    BEGIN
      endpoint_count := cardinality(v_targets);
      pending := 0;
      dead_disabled := 0;
      IF endpoint_count > cardinality(p_delivery_ids) THEN
        outcome := 'need_ids';
        RETURN;
      END IF;

      IF p_idempotency_key IS NOT NULL THEN
        INSERT INTO event_keys (scope_id, key, event_id) VALUES (p_tenant_id, p_idempotency_key, p_event_id)
        ON CONFLICT DO NOTHING
        RETURNING event_keys.event_id INTO v_claimed;
      END IF;

      IF p_idempotency_key IS NOT NULL AND v_claimed IS NULL THEN
        -- A VOLATILE function takes a fresh snapshot per statement: an event a concurrent request
        -- committed with the same key while our insert waited on it is found here.
        outcome := 'duplicate';
        SELECT e.* INTO v_event FROM events e
         WHERE e.id = (SELECT k.event_id FROM event_keys k WHERE k.scope_id = p_tenant_id AND k.key = p_idempotency_key);
      ELSE
        INSERT INTO events AS e (id, tenant_id, origin, type, message_id, idempotency_key, request_hash, body, created_at)
        VALUES (p_event_id, p_tenant_id, p_origin, p_type, p_message_id, p_idempotency_key, p_request_hash, p_body, p_created_at)
        RETURNING e.* INTO v_event;
        outcome := 'created';
        IF p_message_id IS NOT NULL THEN
          -- Taken before fan-out draws the event's place in its message's order (see fan_out_insert).
          INSERT INTO messages AS m (tenant_id, source_id, message_id, last_event_id)
          VALUES (p_tenant_id, NULL, p_message_id, p_event_id)
          ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE SET last_event_id = EXCLUDED.last_event_id, updated_at = now();
        END IF;
        SELECT f.pending, f.dead_disabled INTO pending, dead_disabled
          FROM fan_out_insert(p_event_id, p_tenant_id, p_created_at,
                              CASE WHEN p_message_id IS NOT NULL THEN 'api:' || p_message_id END,
                              NULL, p_default_max_age_seconds, v_targets, p_delivery_ids) f;
      END IF;

      id := v_event.id; tenant_id := v_event.tenant_id; source_id := v_event.source_id; origin := v_event.origin;
      type := v_event.type; message_id := v_event.message_id; status := v_event.status; stale := v_event.stale;
      body := v_event.body; created_at := v_event.created_at; seq := v_event.seq; request_hash := v_event.request_hash;
    END
    $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(intakeAcceptFunction.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
  await knex.raw(publishEventFunction.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
}
