-- admit_due: release 0.1.0's signature. The rule is admit_due_v4 (see its file); this returns the
-- same rows without the trace-context columns and the claim's token, and the delivery's, the
-- endpoint's, the tenant's and the event's ids as the text of their uuids (migrations
-- 20261206000052 to 20261206000055). No release since 0.1.0 calls it; it stays because
-- released migrations' downs drop it by signature (docs/operations/functions.md, "Except").
CREATE OR REPLACE FUNCTION admit_due(
  p_threshold integer, p_batch integer, p_queued_lease_seconds integer,
  p_local integer, p_in_flight_lease_ms integer, p_all_local boolean
) RETURNS TABLE (
  local boolean, id text, tenant_id text, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id text, event_type text, event_created_at timestamptz, body text,
  ep_id text, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, skipped integer
)
LANGUAGE sql VOLATILE AS $$
  SELECT local, id::text, tenant_id::text, status, attempt_count, attempt_base, replayed_at, next_trigger, deadline_at, succeeded_at,
         event_id::text, event_type, event_created_at, body, ep_id::text, url, ep_status, retry_policy, secret_enc,
         previous_secret_enc, previous_secret_expires_at, deleted_at, skipped
    FROM admit_due_v4(p_threshold, p_batch, p_queued_lease_seconds, p_local, p_in_flight_lease_ms, p_all_local)
$$;
