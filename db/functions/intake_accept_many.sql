-- intake_accept_many: accepts a batch of verified, parsed callbacks in one statement
-- (group commit: the api process answers each callback only after this has committed).
--
-- Inputs:  p_items  JSON array, one object per callback, in arrival order: receiptId, eventId
--                   (its uuid), envelopeId (its TypeID, which the body names), deliveryIds (uuids,
--                   a guess of how many are needed), tenantId (its uuid), sourceId, origin,
--                   bodyDigest, receivedAt, type, messageId, dedupeKey, status, statusRank,
--                   statusFinal, sequence, data (the payload's JSON text; absent when the event
--                   has none) or, as the api of release 0.3.0 and earlier sends it, body (the whole
--                   envelope, stored as sent), traceParent (the event's fan-out span as a W3C
--                   traceparent; absent when it is not traced)
--          p_default_max_age_seconds  the platform's MAX_EVENT_AGE_SECONDS
-- Outputs: one row per item, in order: outcome 'accepted', 'duplicate' (the source already sent
--          this dedupe key: event_id is the stored event's, no work), 'stale' (older than what its
--          message reached: stored as evidence, forwarded to nobody) or 'need_ids' (more endpoints
--          match, endpoint_count, than delivery ids were given: nothing written for that item, call
--          again with that many); event_id (its uuid's text; the signature is release 0.1.0's),
--          endpoint_count, pending, dead_disabled.
-- Effects: event_keys (the claimed dedupe key), messages (forward-only status), events, deliveries
--          (fan_out_write), receipts (one per decided callback); delivery_queue through its trigger.
-- Locks:   the event_keys row of each key (a concurrent callback with the same key waits for this
--          statement, then finds the key taken); the messages row of each message until commit,
--          under which the event's place in its message's order is drawn.
--
-- Each callback is decided in turn (a later callback of the batch sees an earlier one's key and
-- status); events, deliveries and receipts are written at the end with one statement per table,
-- since starting a statement is what a callback's rows cost most. VOLATILE under READ COMMITTED:
-- each statement takes a fresh snapshot, so a key a concurrent batch committed is seen. Generic plans
-- (plan_cache_mode) cover the foreign-key checks into the partitioned events table too.
CREATE OR REPLACE FUNCTION intake_accept_many(p_items jsonb, p_default_max_age_seconds integer)
RETURNS TABLE (
  outcome text,
  event_id text,
  endpoint_count integer,
  pending integer,
  dead_disabled integer
)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $function$
DECLARE
  x record;
  v_target fan_out_target;
  v_targets fan_out_target[];
  v_claimed uuid;
  v_advanced integer;
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
  FOR x IN SELECT * FROM ROWS FROM (jsonb_to_recordset(p_items) AS (
      "receiptId" text, "eventId" uuid, "envelopeId" text, "deliveryIds" text[], "tenantId" text, "sourceId" text, origin text,
      "bodyDigest" text, "receivedAt" timestamptz, type text, "messageId" text, "dedupeKey" text, status text,
      "statusRank" integer, "statusFinal" boolean, sequence bigint, body text, data text))
    WITH ORDINALITY AS i("receiptId", "eventId", "envelopeId", "deliveryIds", "tenantId", "sourceId", origin, "bodyDigest",
      "receivedAt", type, "messageId", "dedupeKey", status, "statusRank", "statusFinal", sequence, body, data, n) LOOP
    pending := 0;
    dead_disabled := 0;
    endpoint_count := 0;
    event_id := NULL;

    -- Read before anything is written, so that too few ids can be answered without writing.
    v_targets := fan_out_targets(x."tenantId", x.type, event_body(x.body, x."envelopeId", x.type, x."receivedAt", x."messageId", x.data));
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
      SELECT k.event_id::text INTO event_id FROM event_keys k WHERE k.scope_id = x."sourceId" AND k.key = x."dedupeKey";
    ELSE
      event_id := v_claimed::text;
      v_advanced := 0;
      IF x."messageId" IS NOT NULL THEN
        -- The message's status only moves forward: a status of lower or equal rank than the one
        -- the message has reached changes nothing. An event without a status always updates the
        -- row. Either way a row that is written stays locked until commit, so the order drawn
        -- below is the order in which the message's events commit.
        INSERT INTO messages AS m (tenant_id, source_id, message_id, status, status_rank, status_final, last_event_id, updated_at)
        VALUES (x."tenantId"::uuid, x."sourceId", x."messageId", x.status, coalesce(x."statusRank", 0), coalesce(x."statusFinal", false),
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
        FOREACH v_target IN ARRAY v_targets LOOP
          IF v_target.active THEN pending := pending + 1; ELSE dead_disabled := dead_disabled + 1; END IF;
        END LOOP;
        v_event_stale := v_event_stale || false;
        v_fan_event_ids := v_fan_event_ids || x."eventId"::text;
        v_fan_tenant_ids := v_fan_tenant_ids || x."tenantId";
        v_fan_created_ats := v_fan_created_ats || x."receivedAt";
        v_fan_message_keys := v_fan_message_keys || CASE WHEN x."messageId" IS NOT NULL THEN x."sourceId" || ':' || x."messageId" END;
        v_fan_sequences := v_fan_sequences || x.sequence;
        -- Drawn now, while this transaction holds the message's row.
        v_fan_order_seqs := v_fan_order_seqs || fan_out_order_seq(v_fan_message_keys[cardinality(v_fan_message_keys)], v_targets);
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

  -- Events before what references them: receipts check their event; deliveries have had no key
  -- to it since migration 20261205000049.
  INSERT INTO events (id, tenant_id, source_id, origin, type, message_id, dedupe_key, status, status_rank,
                      provider_sequence, stale, body, data, created_at, trace_parent)
  SELECT i."eventId", i."tenantId", i."sourceId", i.origin, i.type, i."messageId", i."dedupeKey", i.status, i."statusRank",
         i.sequence, e.stale, i.body, i.data, i."receivedAt", i."traceParent"
    FROM unnest(v_event_items, v_event_stale) AS e(n, stale)
    JOIN ROWS FROM (jsonb_to_recordset(p_items) AS (
      "receiptId" text, "eventId" uuid, "deliveryIds" text[], "tenantId" uuid, "sourceId" text, origin text,
      "bodyDigest" text, "receivedAt" timestamptz, type text, "messageId" text, "dedupeKey" text, status text,
      "statusRank" integer, "statusFinal" boolean, sequence bigint, body text, data text, "traceParent" text))
    WITH ORDINALITY AS i("receiptId", "eventId", "deliveryIds", "tenantId", "sourceId", origin, "bodyDigest",
      "receivedAt", type, "messageId", "dedupeKey", status, "statusRank", "statusFinal", sequence, body, data, "traceParent", n) USING (n);

  PERFORM fan_out_write(v_fan_event_ids, v_fan_tenant_ids, v_fan_created_ats, v_fan_message_keys, v_fan_sequences,
                        v_fan_order_seqs, p_default_max_age_seconds, v_delivery_events, v_delivery_ids, v_delivery_targets);

  -- Only the receipt's own fields are read back: the payload is not copied out a third time.
  INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest, received_at)
  SELECT i."receiptId", i."tenantId", i."sourceId", r.event_id::uuid, r.outcome, i.origin, i."bodyDigest", i."receivedAt"
    FROM unnest(v_receipt_items, v_receipt_events, v_receipt_outcomes) AS r(n, event_id, outcome)
    JOIN ROWS FROM (jsonb_to_recordset(p_items) AS (
      "receiptId" text, "tenantId" uuid, "sourceId" text, origin text, "bodyDigest" text, "receivedAt" timestamptz))
    WITH ORDINALITY AS i("receiptId", "tenantId", "sourceId", origin, "bodyDigest", "receivedAt", n) USING (n);
END
$function$;
