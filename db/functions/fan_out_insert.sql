-- fan_out_insert: the deliveries of one event (an endpoint's test event, src/store/endpoint-test-store.ts).
--
-- Inputs:  p_event_id, p_tenant_id (their uuids as text), p_created_at  the event, already written by the caller
--          p_message_key           '<source or api>:<message id>', NULL without a message
--          p_provider_sequence     the provider's sequence of the event, if any
--          p_default_max_age_seconds  the platform's MAX_EVENT_AGE_SECONDS
--          p_targets               fan_out_targets' answer for the event
--          p_delivery_ids          at least one id per target (the uuids of TypeIDs made by the caller, as text)
-- Outputs: pending (deliveries created pending), dead_disabled (dead endpoint_disabled ones).
-- Effects: deliveries: one per target, through fan_out_write; draws the event's place in its
--          message's order (fan_out_order_seq).
-- Locks:   none of its own. The caller has written the message's row in this transaction and
--          holds its lock until commit, so places are drawn in the order the message's events
--          commit, which is also the order in which its status advanced.
--
-- Raises when given fewer delivery ids than targets: the caller checks that first.
CREATE OR REPLACE FUNCTION fan_out_insert(
  p_event_id text,
  p_tenant_id text,
  p_created_at timestamp with time zone,
  p_message_key text,
  p_provider_sequence bigint,
  p_default_max_age_seconds integer,
  p_targets fan_out_target[],
  p_delivery_ids text[],
  OUT pending integer,
  OUT dead_disabled integer
)
RETURNS record
LANGUAGE plpgsql
AS $function$
DECLARE
  v_order_seq bigint;
  v_count integer := cardinality(p_targets);
BEGIN
  IF v_count > cardinality(p_delivery_ids) THEN
    RAISE EXCEPTION 'fan_out_insert: % targets but % delivery ids', v_count, cardinality(p_delivery_ids);
  END IF;
  v_order_seq := fan_out_order_seq(p_message_key, p_targets);
  PERFORM fan_out_write(ARRAY[p_event_id], ARRAY[p_tenant_id], ARRAY[p_created_at], ARRAY[p_message_key],
                        ARRAY[p_provider_sequence], ARRAY[v_order_seq], p_default_max_age_seconds,
                        array_fill(1, ARRAY[v_count]), p_delivery_ids[1:v_count], p_targets);
  SELECT count(*) FILTER (WHERE t.active), count(*) FILTER (WHERE NOT t.active)
    INTO pending, dead_disabled
    FROM unnest(p_targets) t;
END
$function$;
