-- next_due: an endpoint's next due deliveries, as many as it has room for right now.
--
-- The one rule for "may this endpoint start another attempt, and with which delivery". Admission
-- (admit_due) and both slot hand-offs (hand_off, called by record_attempt and record_successes)
-- ask it, so a changed status, max_concurrency, rate limit, circuit or ordering applies to all
-- three at once, even while a backlog drains.
--
-- Inputs:  p_endpoint_id; p_want, the most the caller wants; p_threshold, the consecutive failures
--          that make the circuit half-open; p_hand_off, true when a slot that just finished asks.
-- Outputs: up to the endpoint's room, earliest due first: (delivery_id, endpoint_rank from 1, and
--          the endpoint's busy count, max_concurrency and rate tokens, the same on every row).
-- Checks:  the endpoint is active and not deleted; its circuit is not open, and while half-open
--          only one attempt is on its way (the probe); queued + in_flight stay under
--          max_concurrency; rate: whole tokens of the endpoint's bucket, which only admission
--          spends (under its per-endpoint lock), so a hand-off never goes to a rate-limited
--          endpoint; per-message ordering, while the endpoint orders: only the head of a message's
--          line, and only when nothing of that message is already on its way.
-- Effects: none but the row locks.
-- Plans:   generic, with sequential scans priced out, and a few rows expected per call: every statement is a look-up by endpoint, and
--          a plan cached while the tables were small must not scan them once they are large. The
--          candidates' deliveries are locked in a LATERAL subquery, and sorts are priced out, so the plan
--          walks the endpoint's due entries in order, each delivery read by its id, and stops at the
--          limit (a sort would lock every candidate before the limit applies). As a
--          plain join, a plan made while statistics said pending deliveries were rare walked every
--          pending delivery and, for each, the queue: minutes per call once a backlog built up
--          (docs/performance.md, "A plan that walked every pending delivery").
-- Locks:   FOR UPDATE SKIP LOCKED on the picked `deliveries` rows (found through delivery_queue,
--          judged again on deliveries). Admission holds the endpoint's advisory lock; a hand-off
--          does not need it, because it only replaces the delivery its slot just finished, so it
--          never raises the busy count admission counts.
CREATE OR REPLACE FUNCTION next_due(p_endpoint_id text, p_want integer, p_threshold integer, p_hand_off boolean)
RETURNS TABLE (delivery_id text, endpoint_rank bigint, busy integer, max_concurrency integer, tokens double precision)
LANGUAGE plpgsql VOLATILE ROWS 5 SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_sort = off AS $$
DECLARE
  e record;
  v_busy integer;
  v_tokens double precision;
  v_free integer;
BEGIN
  SELECT ep.status, ep.deleted_at, ep.circuit_open_until, ep.consecutive_failures, ep.max_concurrency, ep.ordering,
         ep.rate_limit_per_second, ep.rate_tokens, ep.rate_tokens_at,
         (SELECT count(*)::int FROM delivery_queue a WHERE a.endpoint_id = ep.id AND a.status IN ('queued', 'in_flight')) AS busy
    INTO e FROM endpoints ep WHERE ep.id = p_endpoint_id;
  IF NOT FOUND OR e.status <> 'active' OR e.deleted_at IS NOT NULL OR COALESCE(e.circuit_open_until > now(), false)
     OR (p_hand_off AND e.rate_limit_per_second IS NOT NULL) THEN
    RETURN;
  END IF;
  v_busy := e.busy;
  IF e.rate_limit_per_second IS NOT NULL THEN
    v_tokens := LEAST(e.rate_limit_per_second::float8,
                      COALESCE(e.rate_tokens, e.rate_limit_per_second)
                      + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())));
  END IF;
  v_free := GREATEST(0, LEAST(
              e.max_concurrency - v_busy,
              CASE WHEN e.consecutive_failures >= p_threshold THEN 1 - v_busy ELSE p_want END,
              COALESCE(floor(v_tokens)::int, p_want),
              p_want));
  IF v_free = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT x.id, row_number() OVER (ORDER BY x.next_attempt_at, x.id), v_busy, e.max_concurrency, v_tokens FROM (
      SELECT q.delivery_id AS id, q.next_attempt_at FROM delivery_queue q
             -- Each candidate's delivery is judged and locked as the walk reaches it (see Plans).
             CROSS JOIN LATERAL (SELECT FROM deliveries d WHERE d.id = q.delivery_id AND d.status = 'pending'
                                 FOR UPDATE SKIP LOCKED) d
       WHERE q.endpoint_id = p_endpoint_id AND q.status = 'pending' AND q.next_attempt_at <= now()
         AND (e.ordering <> 'per-message' OR q.order_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM delivery_queue o
                WHERE o.endpoint_id = q.endpoint_id AND o.order_key = q.order_key AND o.delivery_id <> q.delivery_id
                  AND (o.status <> 'pending'
                       OR (COALESCE(o.order_hint, -1), o.order_seq, o.delivery_id) < (COALESCE(q.order_hint, -1), q.order_seq, q.delivery_id))))
       ORDER BY q.next_attempt_at, q.delivery_id
       LIMIT v_free) x;
END $$;
