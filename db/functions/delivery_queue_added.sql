-- delivery_queue_added: statement-level AFTER INSERT trigger on deliveries
-- (deliveries_queue_added), keeping delivery_queue equal to the unfinished deliveries.
--
-- Inputs:  the transition table `added` (REFERENCING NEW TABLE AS added).
-- Outputs: none (trigger; returns NULL).
-- Effects: delivery_queue: one row per inserted delivery that is pending, queued or in_flight.
-- Locks:   row locks of the rows it inserts.
--
-- deliveries stays the truth; delivery_queue is small enough to vacuum every second, so the
-- scheduler's index walks never cross entries of finished deliveries. One INSERT ... SELECT per
-- statement, not per row, for every writer (intake and publish functions included).
CREATE OR REPLACE FUNCTION delivery_queue_added()
RETURNS trigger
LANGUAGE plpgsql
AS $function$
BEGIN
  INSERT INTO delivery_queue (delivery_id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq)
  SELECT n.id, n.endpoint_id, n.tenant_id, n.status, n.next_attempt_at, n.lease_until, n.deadline_at, n.order_key, n.order_hint, n.order_seq
    FROM added n WHERE n.status IN ('pending', 'queued', 'in_flight');
  RETURN NULL;
END
$function$;
