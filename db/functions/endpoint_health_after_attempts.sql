-- endpoint_health_after_attempts: the circuit breaker, moved by attempt results.
--
-- The circuit's one writer. A failure that counts against the endpoint (the worker decides which
-- do, from the failure matrix in src/domain/retry-policy.ts) adds one to
-- consecutive_failures and starts the failure streak; the failure that reaches p_threshold opens
-- the circuit for p_cooldown_seconds. A success closes it and ends the streak, clearing the level
-- of warning announced for it (failure_warned_percent, raised by the sweep's warnFailing in
-- src/delivery/endpoint-health.ts), so the next streak is warned from 50 % again. Readers: next_due
-- (open: nothing starts; half-open, i.e. the cooldown passed with the failures not cleared: one
-- probe at a time) and src/domain/circuit.ts (the state as the API shows it). The success that
-- closes an open circuit sets released_at: what waited behind it was held by the endpoint.
--
-- Inputs:  p_endpoint_ids (each endpoint once), p_failure, p_threshold, p_cooldown_seconds.
-- Outputs: none.
-- Effects: endpoints.consecutive_failures, failing_since, failure_warned_percent,
--          circuit_open_until, released_at. A success on a healthy endpoint writes nothing, so the hot path
--          makes no dead row versions.
-- Locks:   the endpoints' rows, in id order (an index scan over = ANY sorts its keys), so two
--          batches of results never deadlock on them.
-- Plans:   generic, with sequential and bitmap scans priced out: the id order above needs a plain
--          index scan, which a plan made while `endpoints` was small could otherwise replace by a
--          scan of the table, or of a bitmap, in the rows' physical order.
CREATE OR REPLACE FUNCTION endpoint_health_after_attempts(
  p_endpoint_ids uuid[], p_failure boolean, p_threshold integer, p_cooldown_seconds integer)
RETURNS void
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_bitmapscan = off AS $$
BEGIN
  UPDATE endpoints e SET
    consecutive_failures = CASE WHEN p_failure THEN e.consecutive_failures + 1 ELSE 0 END,
    failing_since = CASE WHEN p_failure THEN COALESCE(e.failing_since, now()) ELSE NULL END,
    failure_warned_percent = CASE WHEN p_failure THEN e.failure_warned_percent ELSE NULL END,
    circuit_open_until = CASE WHEN p_failure AND e.consecutive_failures + 1 >= p_threshold
                              THEN now() + make_interval(secs => p_cooldown_seconds) ELSE NULL END,
    released_at = CASE WHEN NOT p_failure AND e.consecutive_failures >= p_threshold THEN now() ELSE e.released_at END
   WHERE e.id = ANY(p_endpoint_ids)
     AND (p_failure OR e.consecutive_failures <> 0 OR e.circuit_open_until IS NOT NULL);
END $$;
