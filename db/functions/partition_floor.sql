-- partition_floor: where a time-partitioned table's key starts for rows made at or after p_at, as
-- a partition bound is written.
--
-- Inputs:  p_plan, the table's row of partition_plan; p_at.
-- Outputs: by p_plan.key_type: 'typeid', typeid_floor(p_plan.id_prefix, p_at); 'uuid' (a key
--          stored as the uuid its TypeID encodes, migration 20261206000053), uuid_floor(p_at) as
--          text. Either sorts as the keys do, so a range of keys is a range of time.
-- Effects: none (IMMUTABLE). Locks: none.
--
-- The one place that says how a table is cut by time: ensure_time_partitions_v2 makes bounds with
-- it, time_period_free compares them, and retention asks it where a window's partitions end
-- (src/store/partitions-store.ts, partitionFloor).
CREATE OR REPLACE FUNCTION partition_floor(p_plan partition_plan, p_at timestamp with time zone)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT CASE p_plan.key_type WHEN 'uuid' THEN uuid_floor(p_at)::text ELSE typeid_floor(p_plan.id_prefix, p_at) END
$function$;
