-- make_time_partition: creates one partition of a time-partitioned table, for [p_start, p_end).
--
-- Inputs:  p_plan          the table's row of partition_plan.
--          p_start, p_end  the period, at UTC midnights, free (time_partitions_wanted).
-- Outputs: none.
-- Effects: CREATE TABLE time_partition_name(...) PARTITION OF <table> FOR VALUES FROM
--          (typeid_floor(prefix, p_start)) TO (typeid_floor(prefix, p_end)).
-- Locks:   lock_for_new_partition before the CREATE, until the caller's transaction ends. The
--          caller holds the partition upkeep's advisory lock (727003), so no other process creates
--          partitions between its finding the period free and this.
--
-- Called by ensure_time_partitions_v2.
CREATE OR REPLACE FUNCTION make_time_partition(p_plan partition_plan, p_start timestamp with time zone, p_end timestamp with time zone)
RETURNS void
LANGUAGE plpgsql
AS $function$
BEGIN
  PERFORM lock_for_new_partition(p_plan.table_name);
  EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', time_partition_name(p_plan, p_start), p_plan.table_name,
                 typeid_floor(p_plan.id_prefix, p_start), typeid_floor(p_plan.id_prefix, p_end));
END
$function$;
