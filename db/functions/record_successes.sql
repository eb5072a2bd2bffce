-- record_successes: release 0.1.0's signature, kept for its processes still running during a rolling
-- deploy (docs/operations/functions.md, "expand"). The rule is record_successes_v2 (see its file); this
-- returns the same rows without the trace-context columns. Nothing of this release calls it. Drop it
-- in the release after next.
CREATE OR REPLACE FUNCTION record_successes(
  p_delivery_ids text[], p_attempt_numbers integer[], p_attempt_ids text[], p_tenant_ids text[], p_triggers text[],
  p_started_ats timestamptz[], p_durations integer[], p_status_codes integer[], p_excerpts text[],
  p_endpoint_ids text[], p_hand_offs boolean[], p_threshold integer, p_lease_ms integer)
RETURNS TABLE (
  applied integer[],
  id text, tenant_id text, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id text, event_type text, event_created_at timestamptz, body text,
  ep_id text, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz
)
LANGUAGE sql VOLATILE AS $$
  SELECT applied, id, tenant_id, status, attempt_count, attempt_base, replayed_at, next_trigger, deadline_at, succeeded_at,
         event_id, event_type, event_created_at, body, ep_id, url, ep_status, retry_policy, secret_enc,
         previous_secret_enc, previous_secret_expires_at, deleted_at
    FROM record_successes_v2(p_delivery_ids, p_attempt_numbers, p_attempt_ids, p_tenant_ids, p_triggers, p_started_ats,
                             p_durations, p_status_codes, p_excerpts, p_endpoint_ids, p_hand_offs, p_threshold, p_lease_ms)
$$;
