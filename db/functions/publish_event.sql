-- publish_event: publishes one event: publish_events (db/functions/publish_events.sql) with a
-- batch of one, so that one event and a batch are published by the same rule.
--
-- Inputs:  p_event_id (its uuid as text), p_delivery_ids (uuids as text, a guess of how many are
--          needed), p_tenant_id (its uuid as text), p_origin,
--          p_type, p_message_id, p_idempotency_key, p_request_hash, p_body, p_created_at,
--          p_default_max_age_seconds (the platform's MAX_EVENT_AGE_SECONDS), p_trace_parent (the
--          event's fan-out span as a W3C traceparent, or NULL when it is not traced)
-- Outputs: publish_events' row for the event, without its ord, the event's and the tenant's ids as
--          their uuids' text.
-- Effects, locks: publish_events'.
--
-- The api publishes through publish_events; this signature stays for callers of one event.
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
LANGUAGE sql
AS $function$
  SELECT p.outcome, p.endpoint_count, p.pending, p.dead_disabled, p.id::text, p.tenant_id::text, p.source_id, p.origin, p.type,
         p.message_id, p.status, p.stale, p.body, p.created_at, p.seq, p.request_hash
    FROM publish_events(
           jsonb_build_array(jsonb_build_object(
             'event_id', p_event_id, 'envelope_id', typeid_of('evt', p_event_id::uuid), 'delivery_ids', to_jsonb(p_delivery_ids), 'tenant_id', p_tenant_id, 'origin', p_origin,
             'type', p_type, 'message_id', p_message_id, 'idempotency_key', p_idempotency_key, 'request_hash', p_request_hash,
             'body', p_body, 'created_at', p_created_at, 'trace_parent', p_trace_parent)),
           p_default_max_age_seconds) p
$function$;

-- The signature of release 0.1.0, without p_trace_parent. No release since calls it; it stays
-- because released migrations' downs alter it by signature (docs/operations/functions.md, "Except").
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
