-- ensure_time_partitions_v2: creates the missing partitions of one time-partitioned table
-- (partition_plan), a table cut by day made a day or a week long.
--
-- Inputs:  p_table        the table, one of partition_plan's.
--          p_from, p_to   the period [p_from, p_to) to cover.
--          p_day_period   'day' or 'week': how long a new partition of a table cut by day (events,
--                         receipts, attempts) is (src/domain/retention.ts, dayTablesPeriod).
--                         audit_log keeps its month.
-- Outputs: how many partitions it created.
-- Effects: CREATE TABLE <table>_p<YYYYMMDD|YYYYMM> PARTITION OF <table> for every period not yet
--          covered, named by its first day (a week begins on Monday, UTC). Where a week is covered
--          in part (days made before the period changed, or the partition holding rows from before
--          partitioning, see partition_bounds), each day of it left uncovered gets a partition of
--          its own, so that no id falls between partitions.
-- Locks:   pg_advisory_xact_lock(727003), as ensure_time_partitions: one process creates, the others
--          then find the partitions there. Before each CREATE, lock_for_new_partition takes the
--          table locks that CREATE is about to take, in the order the platform's writers take them,
--          until the caller's transaction ends. Each wait is at most lock_timeout (200 ms), then it
--          fails with lock_not_available (55P03) and the caller tries again.
--
-- Writers do not all take their tables in one order (a duplicate callback's receipt is written
-- before its key into events is checked; a new event is written before its receipt), so no order
-- of the upkeep's locks avoids a cycle with every one of them. Waiting briefly, well inside
-- deadlock_timeout, the upkeep is the one that yields: traffic queued behind its exclusive lock
-- waits at most that long, and PostgreSQL never has to abort a writer.
--
-- One table per call, each its own transaction (src/store/retention-store.ts, ensurePartitions):
-- creating a day of events holds events exclusively, and a day of attempts needs deliveries, which
-- admission and hand-offs update before they read events; held together, the two deadlocked.
--
-- Each cached plan that reads events locks every one of its partitions, so a week's partition
-- where there would be seven days takes a seventh of those locks, and of the lock table they need
-- (docs/operations/postgres.md). Events and receipts get the same coverage, so a receipts
-- partition keeps its events partition's bounds, which retention drops them by.
--
-- Runs in UTC whatever the session's time zone: a day added in a zone with daylight saving is 23
-- or 25 hours, which would leave an hour between partitions.
CREATE OR REPLACE FUNCTION ensure_time_partitions_v2(p_table text, p_from timestamp with time zone, p_to timestamp with time zone, p_day_period text)
RETURNS integer
LANGUAGE plpgsql
SET TimeZone = 'UTC'
SET lock_timeout = '200ms'
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
  SELECT * INTO v_plan FROM partition_plan WHERE table_name = p_table;
  IF NOT FOUND THEN
    RAISE EXCEPTION '% is not a time-partitioned table (partition_plan)', coalesce(p_table, 'null');
  END IF;
  PERFORM pg_advisory_xact_lock(727003);
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
  RETURN v_made;
END
$function$;
