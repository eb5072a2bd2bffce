-- publish_event: publishes one event (POST /v1/events, and the platform's operational
-- events): the event, its message's row and fan-out in one statement.
--
-- Inputs:  p_event_id, p_delivery_ids (a guess of how many are needed), p_tenant_id, p_origin,
--          p_type, p_message_id, p_idempotency_key, p_request_hash, p_body, p_created_at,
--          p_default_max_age_seconds (the platform's MAX_EVENT_AGE_SECONDS), p_trace_parent (the
--          event's fan-out span as a W3C traceparent, or NULL when it is not traced)
-- Outputs: outcome 'created'; 'duplicate' (the tenant already used this Idempotency-Key: the first
--          event comes back with the request_hash it was made from, and the caller tells the same
--          request from a conflicting one); or 'need_ids' (more endpoints match, endpoint_count,
--          than ids were given: nothing written). endpoint_count, pending, dead_disabled, and the
--          event's columns for the answer.
-- Effects: event_keys (the Idempotency-Key), events, messages (last_event_id), deliveries
--          (fan_out_insert); delivery_queue through its trigger.
-- Locks:   the event_keys row of the key (a concurrent request with the same key waits, then finds
--          the first event: each statement of this VOLATILE function takes a fresh snapshot); the
--          message's row until commit, before fan-out draws the event's place in its message's order.
CREATE OR REPLACE FUNCTION publish_event(
  p_event_id text,
  p_delivery_ids text[],
  p_tenant_id text,
  p_origin text,
  p_type text,
  p_message_id text,
  p_idempotency_key text,
  p_request_hash text,
  p_body text,
  p_created_at timestamp with time zone,
  p_default_max_age_seconds integer,
  p_trace_parent text,
  OUT outcome text,
  OUT endpoint_count integer,
  OUT pending integer,
  OUT dead_disabled integer,
  OUT id text,
  OUT tenant_id text,
  OUT source_id text,
  OUT origin text,
  OUT type text,
  OUT message_id text,
  OUT status text,
  OUT stale boolean,
  OUT body text,
  OUT created_at timestamp with time zone,
  OUT seq bigint,
  OUT request_hash text
)
RETURNS record
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $function$
DECLARE
  -- Read before anything is written, so that too few ids can be answered without writing.
  v_targets fan_out_target[] := fan_out_targets(p_tenant_id, p_type, p_body);
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
    INSERT INTO events AS e (id, tenant_id, origin, type, message_id, idempotency_key, request_hash, body, created_at, trace_parent)
    VALUES (p_event_id, p_tenant_id, p_origin, p_type, p_message_id, p_idempotency_key, p_request_hash, p_body, p_created_at,
            p_trace_parent)
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
$function$;

-- The signature of release 0.1.0, without p_trace_parent, for its processes still running during a
-- rolling deploy (docs/operations/functions.md, "expand"). Drop it in the release after next.
CREATE OR REPLACE FUNCTION publish_event(
  p_event_id text, p_delivery_ids text[], p_tenant_id text, p_origin text, p_type text, p_message_id text,
  p_idempotency_key text, p_request_hash text, p_body text, p_created_at timestamp with time zone,
  p_default_max_age_seconds integer,
  OUT outcome text, OUT endpoint_count integer, OUT pending integer, OUT dead_disabled integer, OUT id text,
  OUT tenant_id text, OUT source_id text, OUT origin text, OUT type text, OUT message_id text, OUT status text,
  OUT stale boolean, OUT body text, OUT created_at timestamp with time zone, OUT seq bigint, OUT request_hash text
)
RETURNS record
LANGUAGE sql
AS $function$
  SELECT * FROM publish_event(p_event_id, p_delivery_ids, p_tenant_id, p_origin, p_type, p_message_id, p_idempotency_key,
                              p_request_hash, p_body, p_created_at, p_default_max_age_seconds, NULL::text)
$function$;
