-- record_attempt_v4: one attempt's result, its consequence, and the slot's hand-off.
--
-- in_flight -> succeeded | pending (a retry at p_next_at) | dead (p_dead_reason), the attempt's row
-- (or, for a first try that succeeded, its columns on the delivery: attempt_stored_in_delivery),
-- the endpoint's circuit (endpoint_health_after_attempts), then, with p_hand_off_lease_ms, the
-- endpoint's next due delivery straight to in_flight for the same slot (hand_off_v4). The statements
-- run in order, so the hand-off is judged on the circuit as this result left it: the failure that
-- opens the circuit, or a 410 that disabled the endpoint before this was recorded, hands nothing
-- on. A retry back to pending still holds its message's line.
--
-- Inputs:  the attempt (p_delivery_id, p_attempt_number, its id, trigger and outcome as words
--          (stored as codes: attempt_triggers, attempt_outcomes), timing, status code, error,
--          excerpt), the delivery's next state, p_failure (counts against the endpoint),
--          p_threshold and p_cooldown_seconds (circuit), p_hand_off_lease_ms (NULL: no hand-off),
--          p_lease_token (the attempt's claim: claim_held_v2).
--          p_tenant_id is not read (since release 0.3.0, which passes NULL): an attempt's tenant is
--          its delivery's. The column stays, unwritten, because the down step of migration
--          20261201000015 copies attempts back by column position (docs/architecture.md).
-- Outputs: a first row whose `applied` says whether the result was taken (false when the
--          delivery is no longer in flight on this attempt's claim: a late result changes nothing); when
--          a delivery was handed on, that row carries it (columns as src/delivery/sql/claimed.ts).
-- Effects: deliveries (status, the attempt's number as its attempt_count, first_try_* for an
--          attempt stored there), and through the triggers its queue row; attempts, endpoints
--          (circuit), and the handed delivery.
-- Locks:   the delivery's row, the endpoint's row (only when its
--          health changes), the handed row.
-- Plans:   generic, with sequential scans priced out, as hand_off_v4 (see its header).
--
-- The columns of a delivery in flight are those of src/delivery/sql/claimed.ts, ending with the
-- stored trace contexts (its event's fan-out, and a replay's own), so an attempt's span needs no
-- read of its own, then the claim's token (lease_token), which its result is recorded under
-- (claim_held_v2: the claim in the delivery's queue row or in the delivery, as claim_in_queue says). A
-- claim kept in the queue is why this is a new function: release 0.5.0's processes recorded their
-- claims, all written to `deliveries`, through the `_v3` (dropped by migration 20261205000050).
CREATE OR REPLACE FUNCTION record_attempt_v4(
  p_delivery_id uuid, p_attempt_number integer, p_status text, p_next_at timestamptz, p_dead_reason text,
  p_status_code integer, p_last_error text, p_attempt_id uuid, p_tenant_id text, p_trigger text,
  p_started_at timestamptz, p_duration_ms integer, p_outcome text, p_error_class text, p_error_message text,
  p_response_excerpt text, p_endpoint_id uuid, p_failure boolean, p_threshold integer, p_cooldown_seconds integer,
  p_hand_off_lease_ms integer, p_lease_token bigint)
RETURNS TABLE (
  applied boolean, id uuid, tenant_id uuid, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id uuid, event_type text, event_created_at timestamptz, body text,
  ep_id uuid, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text,
  lease_token bigint
)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
  v_in_delivery boolean := attempt_stored_in_delivery(p_trigger, p_attempt_number, p_outcome);
BEGIN
  UPDATE deliveries d SET
    status = p_status, attempt_count = p_attempt_number, next_attempt_at = p_next_at, lease_until = NULL, next_trigger = 'retry',
    dead_reason = p_dead_reason, last_status_code = p_status_code, last_error = p_last_error,
    succeeded_at = CASE WHEN p_status = 'succeeded' THEN COALESCE(d.succeeded_at, now()) ELSE d.succeeded_at END,
    updated_at = now(),
    first_try_started_at = CASE WHEN v_in_delivery THEN p_started_at ELSE d.first_try_started_at END,
    first_try_duration_ms = CASE WHEN v_in_delivery THEN p_duration_ms ELSE d.first_try_duration_ms END,
    first_try_status_code = CASE WHEN v_in_delivery THEN p_status_code ELSE d.first_try_status_code END,
    first_try_excerpt = CASE WHEN v_in_delivery THEN p_response_excerpt ELSE d.first_try_excerpt END
    FROM delivery_queue q
   WHERE d.id = p_delivery_id AND q.delivery_id = p_delivery_id
     AND claim_held_v2(d.status, d.attempt_count, d.lease_until, q.status, q.attempt_count, q.lease_until, p_attempt_number, p_lease_token);
  applied := FOUND;
  IF NOT applied THEN
    RETURN NEXT;
    RETURN;
  END IF;
  IF NOT v_in_delivery THEN
    INSERT INTO attempts (id, delivery_id, attempt_number, trigger, started_at, duration_ms, status_code,
                          outcome, error_class, error_message, response_excerpt, next_attempt_at)
    VALUES (p_attempt_id, p_delivery_id, p_attempt_number, array_position(attempt_triggers(), p_trigger), p_started_at,
            p_duration_ms, p_status_code, array_position(attempt_outcomes(), p_outcome), p_error_class, p_error_message,
            p_response_excerpt, p_next_at);
  END IF;
  PERFORM endpoint_health_after_attempts(ARRAY[p_endpoint_id], p_failure, p_threshold, p_cooldown_seconds);
  IF p_hand_off_lease_ms IS NOT NULL THEN
    RETURN QUERY SELECT true, h.* FROM hand_off_v4(ARRAY[p_endpoint_id], ARRAY[1], p_threshold, p_hand_off_lease_ms) h;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  RETURN NEXT;
END $$;
