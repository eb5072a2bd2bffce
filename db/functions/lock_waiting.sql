-- lock_waiting: which of these deliveries are still waiting in one of these statuses, each locked
-- for the caller's transaction. The one way a statement that finishes waiting work (the sweep's
-- dead letters for max_age and for a disabled or deleted endpoint, an endpoint's deletion) picks it.
--
-- A slot's claim moves a delivery out of `pending` in its queue row without writing `deliveries`
-- (claim_in_queue), so `deliveries.status` alone cannot say the delivery waits, and an UPDATE that
-- read the queue in its own snapshot may find a claim made since gone. Every claim locks the
-- delivery's row first (next_due, FOR UPDATE), so this locks the rows, then, in a snapshot taken
-- after the locks are held (PL/pgSQL gives each statement of a VOLATILE function a fresh one),
-- reads their queue rows: what it answers stays waiting until the caller commits.
--
-- Inputs:  p_ids, candidate deliveries; p_statuses, the waiting statuses the caller finishes
--          (`pending`, `queued`).
-- Outputs: the ids among them waiting in one of those statuses, in both tables.
-- Locks:   FOR UPDATE SKIP LOCKED on their `deliveries` rows: one a claim or a result holds right
--          now is left to the sweep's next round (each second), an endpoint's deletion included
--          (its endpoint-gone step dead-letters what the deletion left).
CREATE OR REPLACE FUNCTION lock_waiting(p_ids uuid[], p_statuses text[]) RETURNS SETOF uuid
LANGUAGE plpgsql VOLATILE ROWS 10 SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  v_locked uuid[];
BEGIN
  SELECT array_agg(l.id) INTO v_locked
    FROM (SELECT d.id FROM deliveries d WHERE d.id = ANY(p_ids) AND d.status = ANY(p_statuses) FOR UPDATE SKIP LOCKED) l;
  IF v_locked IS NULL THEN
    RETURN;
  END IF;
  RETURN QUERY SELECT q.delivery_id FROM delivery_queue q WHERE q.delivery_id = ANY(v_locked) AND q.status = ANY(p_statuses);
END $$;
