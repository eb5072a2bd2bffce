-- ensure_time_partitions_v2: creates the missing partitions of the time-partitioned tables
-- (partition_plan), those cut by day made a day or a week long.
--
-- Inputs:  p_from, p_to   the period [p_from, p_to) to cover.
--          p_day_period   'day' or 'week': how long a new partition of events, receipts and attempts
--                         is (src/domain/retention.ts, dayTablesPeriod). audit_log keeps its month.
-- Outputs: how many partitions it created.
-- Effects: CREATE TABLE <table>_p<YYYYMMDD|YYYYMM> PARTITION OF <table> for every period not yet
--          covered, named by its first day (a week begins on Monday, UTC). Where a week is covered
--          in part (days made before the period changed, or the partition holding rows from before
--          partitioning, see partition_bounds), each day of it left uncovered gets a partition of
--          its own, so that no id falls between partitions.
-- Locks:   pg_advisory_xact_lock(727003), as ensure_time_partitions: one process creates, the others
--          then find the partitions there. Before each CREATE, lock_for_new_partition takes the
--          table locks that CREATE is about to take, in the order the platform's writers take them;
--          tables are walked in that order too (events, receipts, attempts, audit_log).
--
-- Each cached plan that reads events locks every one of its partitions, so a week's partition
-- where there would be seven days keeps those locks, and the lock table they need, flat as the
-- days kept grow (docs/operations/postgres.md). Events and receipts are walked with the same
-- coverage, so a receipts partition keeps its events partition's bounds, which retention drops
-- them by. Called by src/store/retention-store.ts ahead of need.
CREATE OR REPLACE FUNCTION ensure_time_partitions_v2(p_from timestamp with time zone, p_to timestamp with time zone, p_day_period text)
RETURNS integer
LANGUAGE plpgsql
AS $function$
DECLARE
  v_plan partition_plan;
  v_period text;
  v_start timestamptz;
  v_end timestamptz;
  v_day timestamptz;
  v_made integer := 0;
BEGIN
  IF p_day_period IS NULL OR p_day_period NOT IN ('day', 'week') THEN
    RAISE EXCEPTION 'p_day_period must be day or week, not %', coalesce(p_day_period, 'null');
  END IF;
  PERFORM pg_advisory_xact_lock(727003);
  FOR v_plan IN SELECT * FROM partition_plan ORDER BY array_position(ARRAY['events', 'receipts', 'attempts', 'audit_log'], table_name), table_name LOOP
    v_period := CASE v_plan.period WHEN 'day' THEN p_day_period ELSE v_plan.period END;
    v_start := date_trunc(v_period, p_from, 'UTC');
    WHILE v_start < p_to LOOP
      v_end := v_start + ('1 ' || v_period)::interval;
      IF time_partition_made(v_plan, v_start, v_end) THEN
        v_made := v_made + 1;
      ELSIF v_period = 'week' THEN
        v_day := v_start;
        WHILE v_day < v_end LOOP
          IF time_partition_made(v_plan, v_day, v_day + interval '1 day') THEN
            v_made := v_made + 1;
          END IF;
          v_day := v_day + interval '1 day';
        END LOOP;
      END IF;
      v_start := v_end;
    END LOOP;
  END LOOP;
  RETURN v_made;
END
$function$;
