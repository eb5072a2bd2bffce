-- publish_events: publishes a batch of events (POST /v1/events, and the platform's operational
-- events) in one statement: each event, its message's row and its fan-out.
--
-- Inputs:  p_items  JSON array, one object per event, in arrival order: event_id (its uuid),
--                   envelope_id (its TypeID, which the body names), delivery_ids (uuids,
--                   a guess of how many are needed), tenant_id (its uuid), origin, type, message_id,
--                   idempotency_key, request_hash, data (the payload's JSON text; absent when the
--                   event has none) or, as the api of release 0.3.0 and earlier sends it, body
--                   (the whole envelope, stored as sent), created_at, trace_parent (the event's
--                   fan-out span as a W3C traceparent; absent when it is not traced)
--          p_default_max_age_seconds  the platform's MAX_EVENT_AGE_SECONDS
-- Outputs: one row per item, in order (ord, from 1): outcome 'created'; 'duplicate' (the tenant
--          already used this Idempotency-Key, in an earlier statement or earlier in this batch: the
--          first event comes back with the request_hash it was made from, and the caller tells the
--          same request from a conflicting one); or 'need_ids' (more endpoints match,
--          endpoint_count, than ids were given: nothing written for that item). endpoint_count,
--          pending, dead_disabled, and the event's columns for the answer (body: event_body's).
-- Effects: event_keys (the Idempotency-Key), messages (last_event_id), events, deliveries
--          (fan_out_write); delivery_queue through its trigger.
-- Locks:   the event_keys row of each key (a concurrent request with the same key waits, then
--          finds the first event: each statement of this VOLATILE function takes a fresh
--          snapshot); each message's row until commit, before the event's place in its message's
--          order is drawn, so places follow the order in which the message's events commit.
--
-- Each event is decided in turn; events and deliveries are written at the end with one statement
-- per table (so one call of delivery_queue's trigger), since starting a statement is what a
-- published event's rows cost most, as in intake_accept_many.
CREATE OR REPLACE FUNCTION publish_events(p_items jsonb, p_default_max_age_seconds integer)
RETURNS TABLE (
  ord integer,
  outcome text,
  endpoint_count integer,
  pending integer,
  dead_disabled integer,
  id uuid,
  tenant_id uuid,
  source_id text,
  origin text,
  type text,
  message_id text,
  status text,
  stale boolean,
  body text,
  created_at timestamp with time zone,
  seq bigint,
  request_hash text
)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $function$
DECLARE
  x record;
  v_target fan_out_target;
  v_targets fan_out_target[];
  v_claimed uuid;
  v_pending integer;
  v_dead integer;
  -- Per item: its outcome, counts and event (the first event's id for a duplicate).
  v_outcomes text[] := '{}';
  v_counts integer[] := '{}';
  v_pendings integer[] := '{}';
  v_deads integer[] := '{}';
  v_event_ids uuid[] := '{}';
  -- What the batch writes at the end: new events (by item number), their deliveries (fan_out_write's arguments).
  v_event_items integer[] := '{}';
  v_fan_event_ids text[] := '{}';
  v_fan_tenant_ids text[] := '{}';
  v_fan_created_ats timestamptz[] := '{}';
  v_fan_message_keys text[] := '{}';
  v_fan_sequences bigint[] := '{}';
  v_fan_order_seqs bigint[] := '{}';
  v_delivery_events integer[] := '{}';
  v_delivery_ids text[] := '{}';
  v_delivery_targets fan_out_target[] := '{}';
  -- The events of the answer: those this batch made, and the first events of its duplicates.
  v_rows events[];
BEGIN
  FOR x IN SELECT * FROM ROWS FROM (jsonb_to_recordset(p_items) AS (
      event_id uuid, envelope_id text, delivery_ids text[], tenant_id text, origin text, type text, message_id text,
      idempotency_key text, request_hash text, body text, data text, created_at timestamptz))
    WITH ORDINALITY AS i(event_id, envelope_id, delivery_ids, tenant_id, origin, type, message_id, idempotency_key, request_hash,
      body, data, created_at, n) LOOP
    -- Read before anything is written, so that too few ids can be answered without writing.
    v_targets := fan_out_targets(x.tenant_id, x.type, event_body(x.body, x.envelope_id, x.type, x.created_at, x.message_id, x.data));
    v_counts := v_counts || cardinality(v_targets);
    v_pending := 0;
    v_dead := 0;
    v_claimed := NULL;
    IF cardinality(v_targets) > cardinality(x.delivery_ids) THEN
      v_outcomes := v_outcomes || 'need_ids'::text;
      v_event_ids := v_event_ids || NULL::uuid;
    ELSE
      IF x.idempotency_key IS NOT NULL THEN
        -- A tenant's scope is its uuid's text, written as uuid writes it (a source's is its TypeID).
        INSERT INTO event_keys AS k (scope_id, key, event_id) VALUES (x.tenant_id::uuid::text, x.idempotency_key, x.event_id)
        ON CONFLICT DO NOTHING
        RETURNING k.event_id INTO v_claimed;
      END IF;
      IF x.idempotency_key IS NOT NULL AND v_claimed IS NULL THEN
        -- A fresh snapshot per statement: a key a concurrent request committed while our insert
        -- waited on it is found here, and so is one claimed earlier in this batch.
        v_outcomes := v_outcomes || 'duplicate'::text;
        v_event_ids := v_event_ids
          || (SELECT k.event_id FROM event_keys k WHERE k.scope_id = x.tenant_id::uuid::text AND k.key = x.idempotency_key);
      ELSE
        v_outcomes := v_outcomes || 'created'::text;
        v_event_ids := v_event_ids || x.event_id;
        v_event_items := v_event_items || x.n::integer;
        IF x.message_id IS NOT NULL THEN
          -- Taken before the event's place in its message's order is drawn below.
          INSERT INTO messages AS m (tenant_id, source_id, message_id, last_event_id)
          VALUES (x.tenant_id::uuid, NULL, x.message_id, x.event_id)
          ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE SET last_event_id = EXCLUDED.last_event_id, updated_at = now();
        END IF;
        FOREACH v_target IN ARRAY v_targets LOOP
          IF v_target.active THEN v_pending := v_pending + 1; ELSE v_dead := v_dead + 1; END IF;
        END LOOP;
        v_fan_event_ids := v_fan_event_ids || x.event_id::text;
        v_fan_tenant_ids := v_fan_tenant_ids || x.tenant_id;
        v_fan_created_ats := v_fan_created_ats || x.created_at;
        v_fan_message_keys := v_fan_message_keys || CASE WHEN x.message_id IS NOT NULL THEN 'api:' || x.message_id END;
        v_fan_sequences := v_fan_sequences || NULL::bigint;
        -- Drawn now, while this transaction holds the message's row.
        v_fan_order_seqs := v_fan_order_seqs || fan_out_order_seq(v_fan_message_keys[cardinality(v_fan_message_keys)], v_targets);
        v_delivery_events := v_delivery_events || array_fill(cardinality(v_fan_event_ids), ARRAY[cardinality(v_targets)]);
        v_delivery_ids := v_delivery_ids || x.delivery_ids[1:cardinality(v_targets)];
        v_delivery_targets := v_delivery_targets || v_targets;
      END IF;
    END IF;
    v_pendings := v_pendings || v_pending;
    v_deads := v_deads || v_dead;
  END LOOP;

  -- Events before their deliveries, in this one transaction (deliveries have no key to check it
  -- since migration 20261205000049). The rows come back for the answer.
  WITH created AS (
    INSERT INTO events AS e (id, tenant_id, origin, type, message_id, idempotency_key, request_hash, body, data, created_at, trace_parent)
    SELECT i.event_id, i.tenant_id, i.origin, i.type, i.message_id, i.idempotency_key, i.request_hash, i.body, i.data, i.created_at, i.trace_parent
      FROM unnest(v_event_items) AS w(n)
      JOIN ROWS FROM (jsonb_to_recordset(p_items) AS (
        event_id uuid, tenant_id uuid, origin text, type text, message_id text, idempotency_key text, request_hash text,
        body text, data text, created_at timestamptz, trace_parent text))
      WITH ORDINALITY AS i(event_id, tenant_id, origin, type, message_id, idempotency_key, request_hash, body, data, created_at,
        trace_parent, n) USING (n)
     ORDER BY n
    RETURNING e.*
  )
  SELECT coalesce(array_agg(ROW(c.*)::events), '{}') INTO v_rows FROM created c;
  IF 'duplicate' = ANY(v_outcomes) THEN
    -- A duplicate's first event, read back unless this batch made it.
    v_rows := v_rows || ARRAY(
      SELECT e FROM events e
       WHERE e.id = ANY(ARRAY(SELECT u.id FROM unnest(v_event_ids, v_outcomes) AS u(id, outcome) WHERE u.outcome = 'duplicate'
                              EXCEPT SELECT (unnest(v_rows)).id)));
  END IF;

  PERFORM fan_out_write(v_fan_event_ids, v_fan_tenant_ids, v_fan_created_ats, v_fan_message_keys, v_fan_sequences,
                        v_fan_order_seqs, p_default_max_age_seconds, v_delivery_events, v_delivery_ids, v_delivery_targets);

  RETURN QUERY
  SELECT r.n::integer, r.outcome, r.endpoint_count, r.pending, r.dead_disabled, e.id, e.tenant_id, e.source_id, e.origin,
         e.type, e.message_id, e.status, e.stale, event_body(e), e.created_at, e.seq, e.request_hash
    FROM unnest(v_outcomes, v_counts, v_pendings, v_deads, v_event_ids)
         WITH ORDINALITY AS r(outcome, endpoint_count, pending, dead_disabled, event_id, n)
    LEFT JOIN unnest(v_rows) e ON e.id = r.event_id
   ORDER BY r.n;
END
$function$;
