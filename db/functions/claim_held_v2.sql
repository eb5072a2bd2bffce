-- claim_held_v2: whether an attempt's result may still be recorded on its delivery, wherever its
-- claim is kept. The one guard of every statement that records a result or gives an attempt back
-- (record_attempt_v4, record_successes_v4, the egress failure in src/delivery/sql/attempts.ts).
--
-- The claim is the queue row's when claim_in_queue says so, else the delivery's own; either must
-- be in flight on this attempt under this token (claim_held).
--
-- Inputs:  the delivery's status, attempt_count and lease_until; its queue row's (NULL when it has
--          none); the attempt's number and its claim's token. Inlined by the planner: a plain SQL
--          expression of its arguments.
CREATE OR REPLACE FUNCTION claim_held_v2(
  p_status text, p_attempt_count integer, p_lease_until timestamptz,
  p_queue_status text, p_queue_attempt integer, p_queue_lease timestamptz,
  p_attempt_number integer, p_token bigint
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT COALESCE(CASE WHEN claim_in_queue(p_status, p_attempt_count, p_queue_status, p_queue_attempt)
                       THEN claim_held(p_queue_status, p_queue_attempt, p_queue_lease, p_attempt_number, p_token)
                       ELSE claim_held(p_status, p_attempt_count, p_lease_until, p_attempt_number, p_token) END, false)
$$;
