-- delivery_queue_changed: statement-level AFTER UPDATE and AFTER DELETE trigger on deliveries
-- (deliveries_queue_changed, deliveries_queue_removed), keeping delivery_queue equal to the
-- unfinished deliveries.
--
-- Inputs:  the transition table `changed` (REFERENCING NEW TABLE AS changed after an update, OLD
--          TABLE AS changed after a delete).
-- Outputs: none (trigger; returns NULL).
-- Effects: delivery_queue: deletes the rows of deliveries that were deleted (a tenant's deletion;
--          retention deletes only finished ones, which have none) or that finished (succeeded,
--          dead, ...); inserts or updates the rows of those still pending, queued or in_flight,
--          writing only rows whose scheduling columns changed. The queue has no foreign key to
--          deliveries (migration 20261205000049): this is the only rule that keeps it a mirror.
-- Locks:   row locks of the queue rows it writes; the caller already holds the deliveries rows,
--          so locks are taken in one order, deliveries then delivery_queue.
-- Plans:   sequential scans priced out, and the finished rows found by primary key: a plan made
--          while the statistics counted a few rows in a large queue (a vacuum during a large
--          insert leaves them so) once deleted them through a whole-index scan of another index
--          that held delivery_id (migration 20261203000040; docs/performance.md, "Backlogs yield
--          to live work").
CREATE OR REPLACE FUNCTION delivery_queue_changed()
RETURNS trigger
LANGUAGE plpgsql SET enable_seqscan = off
AS $function$
DECLARE
  v_finished uuid[];
BEGIN
  -- Arrays, so each delete probes the primary key whatever the planner guesses of `changed`.
  -- Deleted deliveries: only unfinished ones have a queue row (retention deletes finished ones).
  IF TG_OP = 'DELETE' THEN
    DELETE FROM delivery_queue WHERE delivery_id = ANY(ARRAY(SELECT n.id FROM changed n WHERE n.status IN ('pending', 'queued', 'in_flight')));
    RETURN NULL;
  END IF;
  SELECT array_agg(n.id) INTO v_finished FROM changed n WHERE n.status NOT IN ('pending', 'queued', 'in_flight');
  IF v_finished IS NOT NULL THEN
    DELETE FROM delivery_queue WHERE delivery_id = ANY(v_finished);
  END IF;
  INSERT INTO delivery_queue AS q (delivery_id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq)
  SELECT n.id, n.endpoint_id, n.tenant_id, n.status, n.next_attempt_at, n.lease_until, n.deadline_at, n.order_key, n.order_hint, n.order_seq
    FROM changed n WHERE n.status IN ('pending', 'queued', 'in_flight')
  ON CONFLICT (delivery_id) DO UPDATE SET
    status = EXCLUDED.status, next_attempt_at = EXCLUDED.next_attempt_at, lease_until = EXCLUDED.lease_until,
    deadline_at = EXCLUDED.deadline_at, order_key = EXCLUDED.order_key, order_hint = EXCLUDED.order_hint, order_seq = EXCLUDED.order_seq
  WHERE (q.status, q.next_attempt_at, q.lease_until, q.deadline_at, q.order_key, q.order_hint, q.order_seq)
        IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.next_attempt_at, EXCLUDED.lease_until, EXCLUDED.deadline_at,
                          EXCLUDED.order_key, EXCLUDED.order_hint, EXCLUDED.order_seq);
  RETURN NULL;
END
$function$;
