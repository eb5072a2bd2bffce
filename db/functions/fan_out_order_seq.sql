-- fan_out_order_seq: an event's place in its message's order, drawn only when one of the endpoints
-- it goes to orders per message. The one rule for it: intake_accept_many, publish_events and
-- fan_out_insert all draw through here, and fan_out_write stores it on the per-message deliveries.
--
-- Inputs:  p_message_key  '<source or api>:<message id>', NULL for an event without a message
--          p_targets      fan_out_targets' answer for the event
-- Outputs: the next value of events.seq, or NULL (no message, or no target orders per message).
-- Effects: advances events' sequence when it draws.
-- Locks:   none of its own. Callers have written the message's row in this transaction and hold it
--          until commit, so places are drawn in the order in which the message's events commit.
CREATE OR REPLACE FUNCTION fan_out_order_seq(p_message_key text, p_targets fan_out_target[])
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
AS $function$
DECLARE
  v_target fan_out_target;
BEGIN
  -- Once per callback and published event: plain PL/pgSQL steps, no query, until it draws.
  IF p_message_key IS NULL THEN
    RETURN NULL;
  END IF;
  FOREACH v_target IN ARRAY p_targets LOOP
    IF v_target.per_message THEN
      RETURN nextval(pg_get_serial_sequence('events', 'seq'));
    END IF;
  END LOOP;
  RETURN NULL;
END
$function$;
