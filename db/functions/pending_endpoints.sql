-- pending_endpoints: the endpoints that have at least one pending delivery, in id order.
--
-- The one way to find them: a skip scan over delivery_queue_due, one index descent per endpoint with
-- a pending delivery, so its cost follows those endpoints, never the pending rows (a backlog of
-- millions) nor the endpoints that exist. Admission's candidates come from it (admit_due_v4), and
-- so does the sweep's dead-letter step for disabled and deleted endpoints (src/delivery/sql/sweep.ts),
-- which read every pending entry of the queue on each sweep before (docs/performance.md, "The full
-- run at the end of the sitting", twelfth sitting).
--
-- Inputs:  none.
-- Outputs: one row per endpoint with a pending delivery, whether due now or later.
-- Plans:   its own settings, whoever calls it: each step's ORDER BY is the index's own order, and
--          with sequential scans and sorts priced out it stays one descent, even while the queue's
--          statistics still say it is empty (right after a large commit of pending rows, the sweep's
--          step with its caller's settings read the whole queue for each endpoint). PL/pgSQL, not
--          SQL: a SQL function with settings of its own is planned again on every call, 135 µs of
--          an admission round's time against 17 µs for a plan kept by the session
--          (docs/performance.md, "A function planned on every call").
CREATE OR REPLACE FUNCTION pending_endpoints() RETURNS SETOF uuid
LANGUAGE plpgsql STABLE PARALLEL SAFE SET enable_seqscan = off SET enable_sort = off AS $$
BEGIN
  RETURN QUERY
  WITH RECURSIVE pend(endpoint_id) AS (
      (SELECT q.endpoint_id FROM delivery_queue q WHERE q.status = 'pending'
        ORDER BY q.endpoint_id, q.next_attempt_at LIMIT 1)
    UNION ALL
      SELECT (SELECT q.endpoint_id FROM delivery_queue q
               WHERE q.status = 'pending' AND q.endpoint_id > pend.endpoint_id
               ORDER BY q.endpoint_id, q.next_attempt_at LIMIT 1)
        FROM pend WHERE pend.endpoint_id IS NOT NULL
  )
  SELECT pend.endpoint_id FROM pend WHERE pend.endpoint_id IS NOT NULL;
END
$$;
