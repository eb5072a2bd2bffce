-- lock_for_new_partition: takes the locks that CREATE TABLE ... PARTITION OF
-- p_parent is about to take, in the order the platform's writers take them.
--
-- Inputs:  p_parent  the partitioned table.
-- Outputs: none.
-- Effects: none beyond the locks.
-- Locks:   events: events ACCESS EXCLUSIVE, then receipts SHARE ROW EXCLUSIVE;
--          receipts: events SHARE ROW EXCLUSIVE, then receipts ACCESS EXCLUSIVE;
--          attempts: deliveries SHARE ROW EXCLUSIVE, then attempts ACCESS EXCLUSIVE;
--          any other: the table ACCESS EXCLUSIVE. Held until the caller's transaction ends.
--
-- CREATE would lock the parent, then the tables on the other side of its foreign keys; writers lock
-- them the other way round (recording a result updates the delivery, then logs the attempt), which
-- could deadlock. Taken in the writers' order, a writer waits for the partition or the partition for
-- the writer, never both for each other. deliveries is not locked for events: it has had no key
-- into it since migration 20261205000049. Called by release 0.6.0's ensure_time_partitions,
-- which nothing since calls (it stays for a rollback to 0.6.0); ensure_time_partitions_v2 attaches
-- its partitions instead, which needs no order, and the writers no longer lock events first.
CREATE OR REPLACE FUNCTION lock_for_new_partition(p_parent text)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
  CASE p_parent
    WHEN 'events' THEN
      LOCK TABLE events IN ACCESS EXCLUSIVE MODE;
      LOCK TABLE receipts IN SHARE ROW EXCLUSIVE MODE;
    WHEN 'receipts' THEN
      LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE;
      LOCK TABLE receipts IN ACCESS EXCLUSIVE MODE;
    WHEN 'attempts' THEN
      LOCK TABLE deliveries IN SHARE ROW EXCLUSIVE MODE;
      LOCK TABLE attempts IN ACCESS EXCLUSIVE MODE;
    ELSE
      EXECUTE format('LOCK TABLE %I IN ACCESS EXCLUSIVE MODE', p_parent);
  END CASE;
END
$function$;
