-- claim_held: whether an attempt's result may still be recorded under a claim, given the claim's
-- status, attempt count and lease. claim_held_v2 asks it of the claim wherever it is kept (the
-- guard of record_attempt_v4, record_successes_v4 and the egress failure in
-- src/delivery/sql/attempts.ts).
--
-- The delivery must still be in flight on the attempt its claim counted, under that same claim
-- (lease_token): a late result of an attempt whose lease was taken back, or whose claim a crash of
-- PostgreSQL lost before the delivery was claimed again under the same number, changes nothing.
--
-- Inputs:  the delivery's status, attempt_count and lease_until; the attempt's number and its
--          claim's token. A NULL token holds no claim: a caller that lost its token records nothing.
-- Inlined by the planner: a plain SQL expression of its arguments.
CREATE OR REPLACE FUNCTION claim_held(
  p_status text, p_attempt_count integer, p_lease_until timestamptz, p_attempt_number integer, p_token bigint
) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT p_status = 'in_flight' AND p_attempt_count = p_attempt_number AND lease_token(p_lease_until) = p_token
$$;
