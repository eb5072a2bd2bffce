import type { Knex } from 'knex';
import { fanOutInsertFunction, intakeAcceptManyFunction } from './20261129000011_intake_function.js';
import { up as restoreIntakeAccept } from './20261201000022_intake_repeat_check.js';

/**
 * `intake_accept_many` decides each callback of a batch in turn, as before, but writes the batch's
 * events, deliveries (`fan_out_write`, below) and receipts with one statement per table at the end
 * instead of three per callback. Starting a statement is what a callback's rows cost most after the plans (migration
 * 20261202000026): the executor opens the table and each of its indexes, reads its check
 * constraints back from the catalog, and the deliveries' statement-level trigger that fills
 * `delivery_queue` fires once per statement. Profiled on the bench's intake batches, that start-up
 * was over a quarter of PostgreSQL's CPU per callback; a batch now pays it once.
 *
 * What stays per callback is what decides it, in arrival order: the endpoints the event reaches,
 * the key claim (two callbacks of one batch with one key are one event; a concurrent batch with the
 * key waits for this one), the message's forward-only status (a later callback of the same batch
 * sees an earlier one's status) and the event's place in its message's order. Nothing a later
 * callback decides depends on rows written at the end.
 *
 * The byte-identical check by digest that opened each callback (migration 20261201000022) is gone
 * from this statement: the key claim answers every such repeat already. A body's dedupe key is a
 * function of its bytes (momo keys are read from the body; a Standard Webhooks digest covers the
 * webhook-id that is its key), so two byte-identical callbacks always meet on their key, with the
 * same event and a 'duplicate' receipt; a key and its event's receipts are removed together
 * (retention). The look-up was not cheap: `receipts` is partitioned by event, so a digest that is
 * not there, i.e. every new callback's, cost an index descent in every partition, a quarter of
 * PostgreSQL's CPU per callback once the writes were batched. The digest index stays for the
 * receipt-only statement, which answers the repeats a process recognises from its own recent
 * digests without parsing them (src/inbound/intake-service.ts).
 *
 * `intake_accept`, the one-callback function the old loop called, has no caller left and goes.
 */
const items = `ROWS FROM (jsonb_to_recordset(p_items) AS (
          "receiptId" text, "eventId" text, "deliveryIds" text[], "tenantId" text, "sourceId" text, origin text,
          "bodyDigest" text, "receivedAt" timestamptz, type text, "messageId" text, "dedupeKey" text, status text,
          "statusRank" integer, "statusFinal" boolean, sequence bigint, body text))
        WITH ORDINALITY AS i("receiptId", "eventId", "deliveryIds", "tenantId", "sourceId", origin, "bodyDigest",
          "receivedAt", type, "messageId", "dedupeKey", status, "statusRank", "statusFinal", sequence, body, n)`;

/**
 * The deliveries of many events in one statement, by fan_out_insert's rules (migration
 * 20261129000011): delivery k goes to target k with id k, for the event at position
 * p_delivery_events[k] of the event arrays. Intake calls it once per batch; fan_out_insert, which
 * publishing calls, is now this for its one event, so the two cannot drift apart.
 */
const fanOutWrite = `
    CREATE FUNCTION fan_out_write(
      p_event_ids text[], p_tenant_ids text[], p_created_ats timestamptz[], p_message_keys text[],
      p_provider_sequences bigint[], p_order_seqs bigint[], p_default_max_age_seconds integer,
      p_delivery_events integer[], p_delivery_ids text[], p_targets fan_out_target[])
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, dead_reason, last_error, next_attempt_at,
                              deadline_at, order_key, order_hint, order_seq, created_at, updated_at)
      SELECT d.id, p_tenant_ids[d.e], p_event_ids[d.e], d.endpoint_id,
             CASE WHEN d.active THEN 'pending' ELSE 'dead' END,
             CASE WHEN d.active THEN NULL ELSE 'endpoint_disabled' END,
             CASE WHEN d.active THEN NULL ELSE 'endpoint was disabled when the event was accepted' END,
             CASE WHEN d.active THEN p_created_ats[d.e] END,
             -- The endpoint's retryPolicy.maxEventAgeSeconds, else the platform's MAX_EVENT_AGE_SECONDS.
             p_created_ats[d.e] + make_interval(secs => coalesce(d.max_age_seconds, p_default_max_age_seconds)),
             CASE WHEN d.per_message THEN p_message_keys[d.e] END,
             CASE WHEN d.per_message AND p_message_keys[d.e] IS NOT NULL THEN p_provider_sequences[d.e] END,
             CASE WHEN d.per_message AND p_message_keys[d.e] IS NOT NULL THEN p_order_seqs[d.e] END,
             p_created_ats[d.e], p_created_ats[d.e]
        FROM unnest(p_delivery_events, p_delivery_ids, p_targets) AS d(e, id, endpoint_id, active, per_message, max_age_seconds);
    END $$;
`;

const fanOutInsert = `
    CREATE OR REPLACE FUNCTION fan_out_insert(
      p_event_id text, p_tenant_id text, p_created_at timestamptz, p_message_key text, p_provider_sequence bigint,
      p_default_max_age_seconds integer, p_targets fan_out_target[], p_delivery_ids text[],
      OUT pending integer, OUT dead_disabled integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      v_order_seq bigint;
      v_count integer := cardinality(p_targets);
    BEGIN
      IF v_count > cardinality(p_delivery_ids) THEN
        RAISE EXCEPTION 'fan_out_insert: % targets but % delivery ids', v_count, cardinality(p_delivery_ids);
      END IF;
      IF p_message_key IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_targets) t WHERE t.per_message) THEN
        v_order_seq := nextval(pg_get_serial_sequence('events', 'seq'));
      END IF;
      PERFORM fan_out_write(ARRAY[p_event_id], ARRAY[p_tenant_id], ARRAY[p_created_at], ARRAY[p_message_key],
                            ARRAY[p_provider_sequence], ARRAY[v_order_seq], p_default_max_age_seconds,
                            array_fill(1, ARRAY[v_count]), p_delivery_ids[1:v_count], p_targets);
      SELECT count(*) FILTER (WHERE t.active), count(*) FILTER (WHERE NOT t.active)
        INTO pending, dead_disabled
        FROM unnest(p_targets) t;
    END
    $$;
`;

const acceptMany = `
    CREATE OR REPLACE FUNCTION intake_accept_many(p_items jsonb, p_default_max_age_seconds integer)
    RETURNS TABLE (outcome text, event_id text, endpoint_count integer, pending integer, dead_disabled integer)
    LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
    DECLARE
      x record;
      v_target fan_out_target;
      v_targets fan_out_target[];
      v_claimed text;
      v_advanced integer;
      v_per_message boolean;
      -- What the batch writes at the end: new events (by item number, i.n), the events that are not
      -- stale with their deliveries (fan_out_write's arguments), one receipt per decided callback.
      v_event_items integer[] := '{}';
      v_event_stale boolean[] := '{}';
      v_fan_event_ids text[] := '{}';
      v_fan_tenant_ids text[] := '{}';
      v_fan_created_ats timestamptz[] := '{}';
      v_fan_message_keys text[] := '{}';
      v_fan_sequences bigint[] := '{}';
      v_fan_order_seqs bigint[] := '{}';
      v_delivery_events integer[] := '{}';
      v_delivery_ids text[] := '{}';
      v_delivery_targets fan_out_target[] := '{}';
      v_receipt_items integer[] := '{}';
      v_receipt_events text[] := '{}';
      v_receipt_outcomes text[] := '{}';
    BEGIN
      FOR x IN SELECT * FROM ${items} LOOP
        pending := 0;
        dead_disabled := 0;
        endpoint_count := 0;
        event_id := NULL;

        -- Read before anything is written, so that too few ids can be answered without writing.
        v_targets := fan_out_targets(x."tenantId", x.type);
        endpoint_count := cardinality(v_targets);
        IF endpoint_count > cardinality(x."deliveryIds") THEN
          outcome := 'need_ids';
          RETURN NEXT;
          CONTINUE;
        END IF;

        -- The key is claimed first: a concurrent callback with the same key waits here for ours to
        -- commit or roll back, then finds the key taken (or takes it).
        INSERT INTO event_keys (scope_id, key, event_id) VALUES (x."sourceId", x."dedupeKey", x."eventId")
        ON CONFLICT DO NOTHING
        RETURNING event_keys.event_id INTO v_claimed;

        IF v_claimed IS NULL THEN
          outcome := 'duplicate';
          SELECT k.event_id INTO event_id FROM event_keys k WHERE k.scope_id = x."sourceId" AND k.key = x."dedupeKey";
        ELSE
          event_id := v_claimed;
          v_advanced := 0;
          IF x."messageId" IS NOT NULL THEN
            -- The message's status only moves forward: a status of lower or equal rank than the one
            -- the message has reached changes nothing. An event without a status always updates the
            -- row. Either way a row that is written stays locked until commit, so the order drawn
            -- below is the order in which the message's events commit.
            INSERT INTO messages AS m (tenant_id, source_id, message_id, status, status_rank, status_final, last_event_id, updated_at)
            VALUES (x."tenantId", x."sourceId", x."messageId", x.status, coalesce(x."statusRank", 0), coalesce(x."statusFinal", false),
                    v_claimed, now())
            ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE
               SET status = COALESCE(EXCLUDED.status, m.status),
                   status_rank = GREATEST(EXCLUDED.status_rank, m.status_rank),
                   status_final = CASE WHEN EXCLUDED.status IS NULL THEN m.status_final ELSE EXCLUDED.status_final END,
                   last_event_id = EXCLUDED.last_event_id,
                   updated_at = now()
             WHERE EXCLUDED.status IS NULL OR m.status_rank < EXCLUDED.status_rank;
            GET DIAGNOSTICS v_advanced = ROW_COUNT;
          END IF;

          v_event_items := v_event_items || x.n::integer;
          IF x.status IS NOT NULL AND x."messageId" IS NOT NULL AND v_advanced = 0 THEN
            -- Older than what the message already reached: kept as evidence, forwarded to nobody.
            outcome := 'stale';
            v_event_stale := v_event_stale || true;
          ELSE
            outcome := 'accepted';
            v_per_message := false;
            FOREACH v_target IN ARRAY v_targets LOOP
              IF v_target.active THEN pending := pending + 1; ELSE dead_disabled := dead_disabled + 1; END IF;
              v_per_message := v_per_message OR v_target.per_message;
            END LOOP;
            v_event_stale := v_event_stale || false;
            v_fan_event_ids := v_fan_event_ids || x."eventId";
            v_fan_tenant_ids := v_fan_tenant_ids || x."tenantId";
            v_fan_created_ats := v_fan_created_ats || x."receivedAt";
            v_fan_message_keys := v_fan_message_keys || CASE WHEN x."messageId" IS NOT NULL THEN x."sourceId" || ':' || x."messageId" END;
            v_fan_sequences := v_fan_sequences || x.sequence;
            -- Drawn now, while this transaction holds the message's row: see fan_out_insert.
            v_fan_order_seqs := v_fan_order_seqs
              || CASE WHEN v_per_message AND x."messageId" IS NOT NULL THEN nextval(pg_get_serial_sequence('events', 'seq')) END;
            v_delivery_events := v_delivery_events || array_fill(cardinality(v_fan_event_ids), ARRAY[endpoint_count]);
            v_delivery_ids := v_delivery_ids || x."deliveryIds"[1:endpoint_count];
            v_delivery_targets := v_delivery_targets || v_targets;
          END IF;
        END IF;

        v_receipt_items := v_receipt_items || x.n::integer;
        v_receipt_events := v_receipt_events || event_id;
        v_receipt_outcomes := v_receipt_outcomes || outcome;
        RETURN NEXT;
      END LOOP;

      -- Events before what references them: deliveries and receipts check their event.
      INSERT INTO events (id, tenant_id, source_id, origin, type, message_id, dedupe_key, status, status_rank,
                          provider_sequence, stale, body, created_at)
      SELECT i."eventId", i."tenantId", i."sourceId", i.origin, i.type, i."messageId", i."dedupeKey", i.status, i."statusRank",
             i.sequence, e.stale, i.body, i."receivedAt"
        FROM unnest(v_event_items, v_event_stale) AS e(n, stale)
        JOIN ${items} USING (n);

      PERFORM fan_out_write(v_fan_event_ids, v_fan_tenant_ids, v_fan_created_ats, v_fan_message_keys, v_fan_sequences,
                            v_fan_order_seqs, p_default_max_age_seconds, v_delivery_events, v_delivery_ids, v_delivery_targets);

      INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
      SELECT i."receiptId", i."tenantId", i."sourceId", r.event_id, r.outcome, i.origin, i."bodyDigest", i."receivedAt"
        FROM unnest(v_receipt_items, v_receipt_events, v_receipt_outcomes) AS r(n, event_id, outcome)
        JOIN ${items} USING (n);
    END
    $$;
`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(fanOutWrite);
  await knex.raw(fanOutInsert);
  await knex.raw(acceptMany);
  await knex.raw('DROP FUNCTION intake_accept');
}

export async function down(knex: Knex): Promise<void> {
  await restoreIntakeAccept(knex);
  // Migration 20261129000011's loop over intake_accept, with migration 20261202000026's plans.
  await knex.raw(intakeAcceptManyFunction.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
  await knex.raw('ALTER FUNCTION intake_accept_many(jsonb, integer) SET plan_cache_mode = force_generic_plan');
  await knex.raw(fanOutInsertFunction.replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION'));
  await knex.raw('DROP FUNCTION fan_out_write');
}
