-- time_partition_name: the name of a partition of a time-partitioned table that begins at p_start.
--
-- Inputs:  p_plan   the table's row of partition_plan.
--          p_start  the partition's first day (UTC midnight).
-- Outputs: <table>_p<YYYYMMDD>, or <table>_p<YYYYMM> for a table cut by month: a day's or a week's
--          partition is named by its first day (a week's by its Monday).
-- Effects: none. Locks: none.
--
-- Called by time_period_free and ensure_time_partitions_v2; retention finds leftovers by this pattern
-- (src/store/partitions-store.ts, dropDetachedLeftovers).
CREATE OR REPLACE FUNCTION time_partition_name(p_plan partition_plan, p_start timestamp with time zone)
RETURNS text
LANGUAGE sql
STABLE
AS $function$
SELECT p_plan.table_name || '_p' || to_char(p_start AT TIME ZONE 'UTC', CASE p_plan.period WHEN 'month' THEN 'YYYYMM' ELSE 'YYYYMMDD' END)
$function$;
