-- delivery_state: a delivery's status and attempt count as the API shows them. A slot's claim is
-- kept in the delivery's queue row only (claim_in_queue): while it holds, a delivery `pending` in
-- `deliveries` is `in_flight`, on the claim's attempt. A claim written to `deliveries` (a Redis
-- job's) shows there already.
--
-- Inputs:  the delivery's id, status and attempt_count.
-- Outputs: one row (status, attempt_count). Inlined by the planner as a LATERAL subquery: one
--          look-up of the queue's primary key.
CREATE OR REPLACE FUNCTION delivery_state(p_id uuid, p_status text, p_attempt_count integer)
RETURNS TABLE (status text, attempt_count integer)
LANGUAGE sql STABLE AS $$
  SELECT COALESCE(q.status, p_status), COALESCE(q.attempt_count, p_attempt_count)
    FROM (SELECT) AS one
    LEFT JOIN delivery_queue q ON p_status = 'pending' AND q.delivery_id = p_id
                              AND claim_in_queue(p_status, p_attempt_count, q.status, q.attempt_count)
$$;
