-- time_partitions_wanted: the partitions one time-partitioned table needs to cover a period.
--
-- Inputs:  p_plan        the table's row of partition_plan.
--          p_from, p_to  the period [p_from, p_to) to cover.
--          p_period      how long a new partition is: 'day', 'week' (from Monday) or 'month'.
-- Outputs: one range per partition to make, in time order: each p_period that time_period_free,
--          and where a week is covered in part (days made before the period changed, or the
--          partition holding rows from before partitioning), each of its days left free, so that
--          no id falls between partitions.
-- Effects: none. Locks: none beyond reading the catalogue.
--
-- Everything is at UTC midnights, whatever the session's time zone: a day added in a zone with
-- daylight saving is 23 or 25 hours. Called by ensure_time_partitions_v2.
CREATE OR REPLACE FUNCTION time_partitions_wanted(p_plan partition_plan, p_from timestamp with time zone, p_to timestamp with time zone, p_period text)
RETURNS SETOF tstzrange
LANGUAGE plpgsql
STABLE
SET TimeZone = 'UTC'
AS $function$
DECLARE
  v_start timestamptz := date_trunc(p_period, p_from, 'UTC');
  v_end timestamptz;
  v_day timestamptz;
BEGIN
  WHILE v_start < p_to LOOP
    v_end := v_start + ('1 ' || p_period)::interval;
    IF time_period_free(p_plan, v_start, v_end) THEN
      RETURN NEXT tstzrange(v_start, v_end);
    ELSIF p_period = 'week' THEN
      v_day := v_start;
      WHILE v_day < v_end LOOP
        IF time_period_free(p_plan, v_day, v_day + interval '1 day') THEN
          RETURN NEXT tstzrange(v_day, v_day + interval '1 day');
        END IF;
        v_day := v_day + interval '1 day';
      END LOOP;
    END IF;
    v_start := v_end;
  END LOOP;
END
$function$;
