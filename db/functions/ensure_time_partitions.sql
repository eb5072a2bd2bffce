-- ensure_time_partitions: creates the missing partitions of the time-partitioned
-- tables (partition_plan: events, receipts, attempts daily; audit_log monthly).
--
-- Inputs:  p_from, p_to  the period [p_from, p_to) to cover.
-- Outputs: how many partitions it created.
-- Effects: CREATE TABLE <table>_p<YYYYMMDD|YYYYMM> PARTITION OF <table> for every period not yet
--          covered. A period that overlaps a partition already there (e.g. the one holding rows
--          from before partitioning, see partition_bounds) is left to that partition.
-- Locks:   pg_advisory_xact_lock(727003): several processes start at once; one creates, the others
--          then find the partitions there. Before each CREATE, lock_for_new_partition takes the
--          table locks that CREATE is about to take, in the order the platform's writers take them;
--          tables are walked in that order too (events, receipts, attempts, audit_log).
--
-- Partition keys are time-ordered ids, so a range of ids is a range of time: bounds come from
-- partition_floor. Release 0.6.0's processes called it ahead of need; later ones call
-- ensure_time_partitions_v2, which can cut by week, and each finds what the other made.
--
-- The body keeps the indentation it had in the migrations: the down of migration 20261202000025
-- rewrites it by find-and-replace on that text, so rolling back past it needs those lines as they are.
CREATE OR REPLACE FUNCTION ensure_time_partitions(p_from timestamp with time zone, p_to timestamp with time zone)
RETURNS integer
LANGUAGE plpgsql
AS $function$
    DECLARE
      v_plan partition_plan;
      v_start timestamptz;
      v_end timestamptz;
      v_name text;
      v_lo text;
      v_hi text;
      v_made integer := 0;
    BEGIN
      -- Several processes start at once; one creates, the others then find the partitions there.
      PERFORM pg_advisory_xact_lock(727003);
      FOR v_plan IN SELECT * FROM partition_plan ORDER BY array_position(ARRAY['events', 'receipts', 'attempts', 'audit_log'], table_name), table_name LOOP
        v_start := date_trunc(v_plan.period, p_from, 'UTC');
        WHILE v_start < p_to LOOP
          v_end := v_start + CASE v_plan.period WHEN 'day' THEN interval '1 day' ELSE interval '1 month' END;
          v_name := v_plan.table_name || '_p' || to_char(v_start AT TIME ZONE 'UTC', CASE v_plan.period WHEN 'day' THEN 'YYYYMMDD' ELSE 'YYYYMM' END);
          v_lo := partition_floor(v_plan, v_start);
          v_hi := partition_floor(v_plan, v_end);
          IF to_regclass(v_name) IS NULL AND NOT EXISTS (
               SELECT 1 FROM partition_bounds b WHERE b.parent = v_plan.table_name
                  AND (b.lower_bound IS NULL OR b.lower_bound < v_hi) AND (b.upper_bound IS NULL OR b.upper_bound > v_lo)) THEN
            PERFORM lock_for_new_partition(v_plan.table_name);
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', v_name, v_plan.table_name, v_lo, v_hi);
            v_made := v_made + 1;
          END IF;
          v_start := v_end;
        END LOOP;
      END LOOP;
      RETURN v_made;
    END
    $function$;
