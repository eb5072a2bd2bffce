-- time_period_free: whether a new partition of a time-partitioned table may cover [p_start, p_end).
--
-- Inputs:  p_plan          the table's row of partition_plan (its name and how its key is cut).
--          p_start, p_end  the period, at UTC midnights.
-- Outputs: true when no table has the name the partition would take (ensure_time_partitions_v2) and no
--          partition of the table overlaps the period (partition_bounds; a null bound is unbounded).
-- Effects: none. Locks: none beyond reading the catalogue.
--
-- Partition keys are time-ordered ids, so a range of ids is a range of time (partition_floor).
-- Called by time_partitions_wanted. ensure_time_partitions holds the same test inline for
-- release 0.6.0's processes; its body stays as it is, since migration 20261202000025's down rewrites
-- it by find-and-replace (see its header).
CREATE OR REPLACE FUNCTION time_period_free(p_plan partition_plan, p_start timestamp with time zone, p_end timestamp with time zone)
RETURNS boolean
LANGUAGE sql
STABLE
SET TimeZone = 'UTC'
AS $function$
SELECT to_regclass(time_partition_name(p_plan, p_start)) IS NULL AND NOT EXISTS (
  SELECT 1 FROM partition_bounds b
   WHERE b.parent = p_plan.table_name
     AND (b.lower_bound IS NULL OR b.lower_bound < partition_floor(p_plan, p_end))
     AND (b.upper_bound IS NULL OR b.upper_bound > partition_floor(p_plan, p_start)))
$function$;
