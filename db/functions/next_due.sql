-- next_due: an endpoint's next due deliveries, as many as it has room for right now.
--
-- The one rule for "may this endpoint start another attempt, and with which delivery". Admission
-- (admit_due_v4) and both slot hand-offs (hand_off_v4, called by the two recording functions)
-- ask it, so a changed status, max_concurrency, rate limit, circuit or ordering applies to all
-- three at once, even while a backlog drains.
--
-- Inputs:  p_endpoint_id; p_want, the most the caller wants; p_threshold, the consecutive failures
--          that make the circuit half-open; p_hand_off, true when a slot that just finished asks.
-- Outputs: up to the endpoint's room, earliest due first (deliveries due at the same instant in
--          the index's order, which delivery_queue_due no longer breaks by id: migration
--          20261205000051): (delivery_id, endpoint_rank from 1, and the endpoint's busy count,
--          max_concurrency and rate tokens, the same on every row).
-- Checks:  room, as endpoint_room says (status, circuit, max_concurrency, rate tokens); a delivery
--          within its maximum age (one past it waits for the sweep's dead letter, never an
--          attempt); then per-message ordering, while the endpoint orders: only the head of a
--          message's line, and only when nothing of that message is already on its way.
-- Effects: none but the row locks.
-- Plans:   generic, with sequential scans priced out, joins by nested loop only (its own settings,
--          not whichever caller planned it first), and a few rows expected per call: every statement is a look-up by endpoint, and
--          a plan cached while the tables were small must not scan them once they are large. The
--          candidates' deliveries are locked in a LATERAL subquery, and sorts are priced out, so the plan
--          walks the endpoint's due entries in order, each delivery read by its id, and stops at the
--          limit (a sort would lock every candidate before the limit applies). As a
--          plain join, a plan made while statistics said pending deliveries were rare walked every
--          pending delivery and, for each, the queue: minutes per call once a backlog built up
--          (docs/performance.md, "A plan that walked every pending delivery").
-- Locks:   FOR UPDATE SKIP LOCKED on the picked `deliveries` rows (found through delivery_queue,
--          judged again on deliveries), then on their queue rows, judged again there: a slot's
--          claim is written to the queue row only (admit_due_v4, hand_off_v4), so a delivery
--          another process claimed since this statement's snapshot is still `pending` in
--          `deliveries`, and only its queue row says it is taken. Admission holds the endpoint's
--          advisory lock; a hand-off does not need it, because it only replaces the delivery its
--          slot just finished, so it never raises the busy count admission counts. Both locks skip
--          what they cannot take, so the order (deliveries, then the queue, as everywhere) is never
--          waited on here.
CREATE OR REPLACE FUNCTION next_due(p_endpoint_id uuid, p_want integer, p_threshold integer, p_hand_off boolean)
RETURNS TABLE (delivery_id uuid, endpoint_rank bigint, busy integer, max_concurrency integer, tokens double precision)
LANGUAGE plpgsql VOLATILE ROWS 5 SET plan_cache_mode = force_generic_plan SET enable_seqscan = off SET enable_sort = off
  SET enable_hashjoin = off SET enable_mergejoin = off AS $$
DECLARE
  r record;
BEGIN
  SELECT * INTO r FROM endpoint_room(p_endpoint_id, p_want, p_threshold, p_hand_off);
  IF NOT FOUND OR r.free = 0 THEN
    RETURN;
  END IF;
  RETURN QUERY
    SELECT x.id, row_number() OVER (ORDER BY x.next_attempt_at, x.id), r.busy, r.max_concurrency, r.tokens FROM (
      SELECT q.delivery_id AS id, q.next_attempt_at FROM delivery_queue q
             -- Each candidate's delivery is judged and locked as the walk reaches it (see Plans).
             CROSS JOIN LATERAL (SELECT FROM deliveries d WHERE d.id = q.delivery_id AND d.status = 'pending'
                                 FOR UPDATE SKIP LOCKED) d
       WHERE q.endpoint_id = p_endpoint_id AND q.status = 'pending' AND q.next_attempt_at <= now() AND q.deadline_at > now()
         AND (r.ordering <> 'per-message' OR q.order_key IS NULL OR NOT EXISTS (
               SELECT 1 FROM delivery_queue o
                WHERE o.endpoint_id = q.endpoint_id AND o.order_key = q.order_key AND o.delivery_id <> q.delivery_id
                  AND (o.status <> 'pending'
                       OR (COALESCE(o.order_hint, -1), o.order_seq, o.delivery_id) < (COALESCE(q.order_hint, -1), q.order_seq, q.delivery_id))))
       ORDER BY q.next_attempt_at
       LIMIT r.free
       FOR UPDATE OF q SKIP LOCKED) x;
END $$;
