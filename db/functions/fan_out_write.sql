-- fan_out_write: the deliveries of many events in one statement. The one definition of
-- what a fan-out delivery looks like, used by intake_accept_many and publish_events (a batch each) and
-- fan_out_insert (one event: an endpoint's test event), so they cannot drift apart.
--
-- Inputs:  per event i (parallel arrays): p_event_ids, p_tenant_ids (uuids as text), p_created_ats,
--          p_message_keys, p_provider_sequences, p_order_seqs (the event's place in its
--          message's order, drawn by the caller under the message's row lock);
--          p_default_max_age_seconds  the platform's MAX_EVENT_AGE_SECONDS;
--          per delivery k: p_delivery_events[k] (the event's position i), p_delivery_ids[k] (the
--          uuid the delivery's TypeID encodes, as text), p_targets[k] (the endpoint, from
--          fan_out_targets).
-- Outputs: none.
-- Effects: deliveries: one row per k. An active endpoint's is pending, due at once; a disabled
--          endpoint's is dead with reason endpoint_disabled, so what piles up while it is off can
--          be replayed once it is back. deadline_at is created_at plus the endpoint's
--          retryPolicy.maxEventAgeSeconds, else the platform's. Only a per-message endpoint's
--          delivery carries the message's order (key, provider sequence, place).
--          delivery_queue, through the deliveries_queue_added trigger (once per statement).
-- Locks:   row locks of the rows it inserts.
--
-- Delivery, tenant and event ids arrive as the text of their uuids, cast here: this function,
-- fan_out_insert, publish_event and their callers' batches were first created by migrations whose
-- downs drop them by name, so their arguments keep the types those migrations gave them
-- (migrations 20261206000053 to 20261206000055).
CREATE OR REPLACE FUNCTION fan_out_write(
  p_event_ids text[],
  p_tenant_ids text[],
  p_created_ats timestamp with time zone[],
  p_message_keys text[],
  p_provider_sequences bigint[],
  p_order_seqs bigint[],
  p_default_max_age_seconds integer,
  p_delivery_events integer[],
  p_delivery_ids text[],
  p_targets fan_out_target[]
)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
  INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, dead_reason, last_error, next_attempt_at,
                          deadline_at, order_key, order_hint, order_seq, created_at, updated_at)
  SELECT d.id::uuid, p_tenant_ids[d.e]::uuid, p_event_ids[d.e]::uuid, d.endpoint_id,
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
END
$function$;
