-- record_successes_v2: release 0.4.0's signature, kept for its processes while a rolling deploy
-- replaces them. The rule is record_successes_v3 (see its file). Its callers carry no claim tokens:
-- this passes each delivery's current one, so the attempt numbers alone decide, as they did in
-- 0.4.0, and returns the same rows without the token. The release after the one that brings
-- record_successes_v3 drops it (docs/operations/functions.md, "expand, then contract").
CREATE OR REPLACE FUNCTION record_successes_v2(
  p_delivery_ids text[], p_attempt_numbers integer[], p_attempt_ids text[], p_tenant_ids text[], p_triggers text[],
  p_started_ats timestamptz[], p_durations integer[], p_status_codes integer[], p_excerpts text[],
  p_endpoint_ids text[], p_hand_offs boolean[], p_threshold integer, p_lease_ms integer)
RETURNS TABLE (
  applied integer[], id text, tenant_id text, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id text, event_type text, event_created_at timestamptz, body text,
  ep_id text, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text
)
LANGUAGE sql VOLATILE AS $$
  SELECT applied, id, tenant_id, status, attempt_count, attempt_base, replayed_at, next_trigger, deadline_at, succeeded_at,
         event_id, event_type, event_created_at, body, ep_id, url, ep_status, retry_policy, secret_enc,
         previous_secret_enc, previous_secret_expires_at, deleted_at, event_trace_parent, trace_parent
    FROM record_successes_v3(p_delivery_ids, p_attempt_numbers, p_attempt_ids, p_tenant_ids, p_triggers, p_started_ats,
                             p_durations, p_status_codes, p_excerpts, p_endpoint_ids, p_hand_offs, p_threshold, p_lease_ms,
                             ARRAY(SELECT lease_token(d.lease_until)
                                     FROM unnest(p_delivery_ids) WITH ORDINALITY AS u(id, n) LEFT JOIN deliveries d ON d.id = u.id
                                    ORDER BY u.n))
$$;
