-- lease_token: the token of a claim, read from the lease the claim set.
--
-- Every claim of a delivery for an attempt (admit_due_v4, hand_off_v4, claim_delivery for a
-- queued delivery) sets lease_until to now() plus the lease, now() being
-- the start of its transaction, so two claims of one delivery never share a token. A result is
-- recorded only under the token of the claim still current (claim_held): after a crash of
-- PostgreSQL loses a claim's asynchronous commit, the delivery is claimed again under the same
-- attempt number, and the lost claim's late answer must not be taken for the new one's.
--
-- A lease is set once per claim and never renewed while its attempt runs; a renewal would change
-- the token, and would have to give the worker the new one.
--
-- Inputs:  a delivery's lease_until.
-- Outputs: microseconds since the epoch. A number, not a timestamp: a JavaScript Date keeps only
--          milliseconds, and the token makes a round trip through the worker (as a JavaScript
--          number, exact up to 2^53 µs, the year 2255).
CREATE OR REPLACE FUNCTION lease_token(p_lease_until timestamptz) RETURNS bigint
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT (extract(epoch FROM p_lease_until) * 1000000)::bigint
$$;
