-- record_attempt_v2: release 0.4.0's signature, kept for its processes while a rolling deploy
-- replaces them. The rule is record_attempt_v3 (see its file). Its callers carry no claim token:
-- this passes the delivery's current one, so the attempt number alone decides, as it did in 0.4.0,
-- and returns the same rows without the token. The release after the one that brings
-- record_attempt_v3 drops it (docs/operations/functions.md, "expand, then contract").
CREATE OR REPLACE FUNCTION record_attempt_v2(
  p_delivery_id text, p_attempt_number integer, p_status text, p_next_at timestamptz, p_dead_reason text,
  p_status_code integer, p_last_error text, p_attempt_id text, p_tenant_id text, p_trigger text,
  p_started_at timestamptz, p_duration_ms integer, p_outcome text, p_error_class text, p_error_message text,
  p_response_excerpt text, p_endpoint_id text, p_failure boolean, p_threshold integer, p_cooldown_seconds integer,
  p_hand_off_lease_ms integer)
RETURNS TABLE (
  applied boolean, id text, tenant_id text, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id text, event_type text, event_created_at timestamptz, body text,
  ep_id text, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text
)
LANGUAGE sql VOLATILE AS $$
  SELECT applied, id, tenant_id, status, attempt_count, attempt_base, replayed_at, next_trigger, deadline_at, succeeded_at,
         event_id, event_type, event_created_at, body, ep_id, url, ep_status, retry_policy, secret_enc,
         previous_secret_enc, previous_secret_expires_at, deleted_at, event_trace_parent, trace_parent
    FROM record_attempt_v3(p_delivery_id, p_attempt_number, p_status, p_next_at, p_dead_reason, p_status_code, p_last_error,
                           p_attempt_id, p_tenant_id, p_trigger, p_started_at, p_duration_ms, p_outcome, p_error_class,
                           p_error_message, p_response_excerpt, p_endpoint_id, p_failure, p_threshold, p_cooldown_seconds,
                           p_hand_off_lease_ms, (SELECT lease_token(d.lease_until) FROM deliveries d WHERE d.id = p_delivery_id))
$$;
