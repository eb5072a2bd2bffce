-- ensure_time_partitions_v2: creates the missing partitions of one time-partitioned table
-- (partition_plan), a table cut by day made a day or a week long.
--
-- Inputs:  p_table        the table, one of partition_plan's.
--          p_from, p_to   the period [p_from, p_to) to cover.
--          p_day_period   'day' or 'week': how long a new partition of a table cut by day (events,
--                         receipts, attempts) is (src/domain/retention.ts, dayTablesPeriod).
--                         audit_log keeps its month.
-- Outputs: how many partitions it created.
-- Effects: for each range time_partitions_wanted answers, a table time_partition_name(...) made
--          LIKE p_table, then attached to it FOR VALUES FROM (partition_floor(plan, start)) TO
--          (partition_floor(plan, end)). Its indexes, keys and triggers are the parent's, as
--          CREATE TABLE ... PARTITION OF would make them.
-- Locks:   none when nothing is missing. Otherwise pg_advisory_xact_lock(727003), as
--          ensure_time_partitions (one process creates, the others then find the partitions
--          there); then p_table ACCESS SHARE (LIKE), raised by ATTACH to SHARE UPDATE EXCLUSIVE,
--          which no read or write waits for, and SHARE ROW EXCLUSIVE on the tables its foreign
--          keys name (events: receipts, tenants, sources; receipts: events and each of its
--          partitions; attempts: deliveries). Each wait is at most
--          lock_timeout (200 ms); then it fails with lock_not_available (55P03) and the caller
--          tries again.
--
-- Attached rather than created as a partition: CREATE TABLE ... PARTITION OF locks the parent
-- ACCESS EXCLUSIVE, which every read of events (claims, hand-offs, the API) queued behind. Nothing
-- a writer waits for is held while waiting for the keys' tables, so no lock order is needed
-- (docs/architecture.md, "Data over time"). One table per call, each its own transaction
-- (src/store/partitions-store.ts, ensurePartitions).
CREATE OR REPLACE FUNCTION ensure_time_partitions_v2(p_table text, p_from timestamp with time zone, p_to timestamp with time zone, p_day_period text)
RETURNS integer
LANGUAGE plpgsql
SET lock_timeout = '200ms'
AS $function$
DECLARE
  v_plan partition_plan;
  v_period text;
  v_range tstzrange;
  v_made integer := 0;
  v_name text;
BEGIN
  IF p_day_period IS NULL OR p_day_period NOT IN ('day', 'week') THEN
    RAISE EXCEPTION 'p_day_period must be day or week, not %', coalesce(p_day_period, 'null');
  END IF;
  SELECT * INTO v_plan FROM partition_plan WHERE table_name = p_table;
  IF NOT FOUND THEN
    RAISE EXCEPTION '% is not a time-partitioned table (partition_plan)', coalesce(p_table, 'null');
  END IF;
  v_period := CASE v_plan.period WHEN 'day' THEN p_day_period ELSE v_plan.period END;
  -- Most calls find everything there: they wait for no lock, which another process may hold long.
  IF NOT EXISTS (SELECT 1 FROM time_partitions_wanted(v_plan, p_from, p_to, v_period)) THEN
    RETURN 0;
  END IF;
  PERFORM pg_advisory_xact_lock(727003);
  FOR v_range IN SELECT * FROM time_partitions_wanted(v_plan, p_from, p_to, v_period) LOOP
    v_name := time_partition_name(v_plan, lower(v_range));
    -- What PARTITION OF would copy from the parent. Its CHECK constraints must be there to attach,
    -- and become inherited, not local; ATTACH makes the indexes, keys and triggers.
    EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION)',
                   v_name, p_table);
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', p_table, v_name,
                   partition_floor(v_plan, lower(v_range)), partition_floor(v_plan, upper(v_range)));
    v_made := v_made + 1;
  END LOOP;
  RETURN v_made;
END
$function$;
