-- time_partition_made: creates one partition of a time-partitioned table, for [p_start, p_end),
-- unless any of that period is covered already.
--
-- Inputs:  p_plan          the table's row of partition_plan (its name and id prefix).
--          p_start, p_end  the period, at UTC midnights.
-- Outputs: true when it created the partition.
-- Effects: CREATE TABLE <table>_p<YYYYMMDD> (<YYYYMM> for a table cut by month) PARTITION OF <table>
--          FOR VALUES FROM (typeid_floor(prefix, p_start)) TO (typeid_floor(prefix, p_end)),
--          named by the period's first day. Nothing when a table of that name exists or a partition
--          overlaps the period (partition_bounds).
-- Locks:   lock_for_new_partition before the CREATE. The caller holds ensure_time_partitions_v2's
--          advisory lock, so no other process creates partitions meanwhile.
--
-- Partition keys are TypeIDs (time-ordered, under the "C" collation), so a range of ids is a range
-- of time. Called by ensure_time_partitions_v2. ensure_time_partitions holds the same test inline for
-- release 0.6.0's processes; its body stays as it is, since migration 20261202000025's down rewrites
-- it by find-and-replace (see its header).
CREATE OR REPLACE FUNCTION time_partition_made(p_plan partition_plan, p_start timestamp with time zone, p_end timestamp with time zone)
RETURNS boolean
LANGUAGE plpgsql
SET TimeZone = 'UTC'
AS $function$
DECLARE
  v_name text := p_plan.table_name || '_p' || to_char(p_start AT TIME ZONE 'UTC', CASE p_plan.period WHEN 'month' THEN 'YYYYMM' ELSE 'YYYYMMDD' END);
  v_lo text := typeid_floor(p_plan.id_prefix, p_start);
  v_hi text := typeid_floor(p_plan.id_prefix, p_end);
BEGIN
  IF to_regclass(v_name) IS NOT NULL OR EXISTS (
       SELECT 1 FROM partition_bounds b WHERE b.parent = p_plan.table_name
          AND (b.lower_bound IS NULL OR b.lower_bound < v_hi) AND (b.upper_bound IS NULL OR b.upper_bound > v_lo)) THEN
    RETURN false;
  END IF;
  PERFORM lock_for_new_partition(p_plan.table_name);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', v_name, p_plan.table_name, v_lo, v_hi);
  RETURN true;
END
$function$;
