-- endpoint_room: how many more attempts an endpoint may start right now, and why not more.
--
-- The capacity half of next_due, on its own so that admission can leave out, before it locks
-- anything, the endpoints that have due work but no room: their hand-off chains take that work as
-- their slots finish. During a burst most rounds found only such endpoints, and each still paid
-- for the whole admission statement (docs/performance.md, "Rounds that only found full endpoints").
-- next_due asks it again, under the endpoint's lock, for the answer that counts.
--
-- Inputs:  p_endpoint_id; p_want, the most the caller wants; p_threshold, the consecutive failures
--          that make the circuit half-open; p_hand_off, true when a slot that just finished asks.
-- Outputs: one row: free (0 when none, and when the endpoint is missing, not active, deleted, its
--          circuit open, or a hand-off asks for a rate-limited endpoint), the endpoint's busy count
--          (queued + in_flight), max_concurrency, whole rate tokens as a float (NULL without a
--          rate limit), and its ordering.
-- Checks:  the endpoint is active and not deleted; its circuit is not open, and while half-open
--          only one attempt is on its way (the probe); queued + in_flight stay under
--          max_concurrency; rate: whole tokens of the endpoint's bucket, which only admission
--          spends (under its per-endpoint lock), so a hand-off never goes to a rate-limited
--          endpoint.
-- Effects: none.
-- Plans:   generic, with sequential scans priced out: a look-up by key and a count over
--          delivery_queue_busy for one endpoint.
CREATE OR REPLACE FUNCTION endpoint_room(p_endpoint_id text, p_want integer, p_threshold integer, p_hand_off boolean,
  OUT free integer, OUT busy integer, OUT max_concurrency integer, OUT tokens double precision, OUT ordering text)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  e record;
BEGIN
  free := 0;
  SELECT ep.status, ep.deleted_at, ep.circuit_open_until, ep.consecutive_failures, ep.max_concurrency, ep.ordering,
         ep.rate_limit_per_second, ep.rate_tokens, ep.rate_tokens_at,
         (SELECT count(*)::int FROM delivery_queue a WHERE a.endpoint_id = ep.id AND a.status IN ('queued', 'in_flight')) AS busy
    INTO e FROM endpoints ep WHERE ep.id = p_endpoint_id;
  IF NOT FOUND OR e.status <> 'active' OR e.deleted_at IS NOT NULL OR COALESCE(e.circuit_open_until > now(), false)
     OR (p_hand_off AND e.rate_limit_per_second IS NOT NULL) THEN
    RETURN;
  END IF;
  busy := e.busy;
  max_concurrency := e.max_concurrency;
  ordering := e.ordering;
  IF e.rate_limit_per_second IS NOT NULL THEN
    tokens := LEAST(e.rate_limit_per_second::float8,
                    COALESCE(e.rate_tokens, e.rate_limit_per_second)
                    + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())));
  END IF;
  free := GREATEST(0, LEAST(
            e.max_concurrency - e.busy,
            CASE WHEN e.consecutive_failures >= p_threshold THEN 1 - e.busy ELSE p_want END,
            COALESCE(floor(tokens)::int, p_want),
            p_want));
END $$;
