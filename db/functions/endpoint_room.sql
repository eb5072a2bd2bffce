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
-- Outputs: no row for a missing endpoint; else one: free (0 when the endpoint is not active, is
--          deleted, its circuit is open, or a hand-off asks for a rate-limited endpoint), the
--          endpoint's busy count (queued + in_flight), max_concurrency, rate tokens as a float
--          (NULL without a rate limit), and its ordering.
-- Checks:  the endpoint is active and not deleted; its circuit is not open, and while half-open
--          only one attempt is on its way (the probe); queued + in_flight stay under
--          max_concurrency; rate: whole tokens of the endpoint's bucket, which only admission
--          spends (under its per-endpoint lock), so a hand-off never goes to a rate-limited
--          endpoint.
-- Effects: none.
-- Plans:   one SQL statement, inlined into the statement that calls it (no function call, no
--          settings of its own: it runs once per hand-off), so it is planned with its caller's
--          settings: a look-up by key and a count over delivery_queue_busy for one endpoint.
CREATE OR REPLACE FUNCTION endpoint_room(p_endpoint_id uuid, p_want integer, p_threshold integer, p_hand_off boolean)
RETURNS TABLE (free integer, busy integer, max_concurrency integer, tokens double precision, ordering text)
LANGUAGE sql STABLE AS $$
  SELECT CASE WHEN e.status <> 'active' OR e.deleted_at IS NOT NULL OR COALESCE(e.circuit_open_until > now(), false)
                   OR (p_hand_off AND e.rate_limit_per_second IS NOT NULL) THEN 0
              ELSE GREATEST(0, LEAST(
                     e.max_concurrency - b.busy,
                     CASE WHEN e.consecutive_failures >= p_threshold THEN 1 - b.busy ELSE p_want END,
                     COALESCE(floor(t.tokens)::int, p_want),
                     p_want)) END,
         b.busy, e.max_concurrency, t.tokens, e.ordering
    FROM endpoints e
         CROSS JOIN LATERAL (SELECT count(*)::int AS busy FROM delivery_queue a
                              WHERE a.endpoint_id = e.id AND a.status IN ('queued', 'in_flight')) b
         CROSS JOIN LATERAL (SELECT CASE WHEN e.rate_limit_per_second IS NOT NULL THEN
                                      LEAST(e.rate_limit_per_second::float8,
                                            COALESCE(e.rate_tokens, e.rate_limit_per_second)
                                            + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())))
                                    END AS tokens) t
   WHERE e.id = p_endpoint_id
$$;
