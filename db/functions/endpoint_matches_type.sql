-- endpoint_matches_type: whether an endpoint's event-type filter takes an event of this type.
--
-- Inputs:  p_event_types  the endpoint's eventTypes (exact types, or prefixes ending in `.*`)
--          p_type         the event's type
-- Outputs: true when the filter takes the type (NULL for a NULL input: STRICT).
-- Effects: none (IMMUTABLE).
-- Locks:   none.
--
-- The one rule, asked by fan-out (fan_out_targets) and by a backfill: an empty filter means every
-- type except operational events (platform.*), so a catch-all endpoint never receives a type it did
-- not know existed; those only reach endpoints that name them, exactly or by an `x.*` prefix.
-- PL/pgSQL rather than SQL: a SQL function with a subquery is not inlined, and then costs more per
-- endpoint than this loop (see docs/performance.md).
CREATE OR REPLACE FUNCTION endpoint_matches_type(p_event_types text[], p_type text)
RETURNS boolean
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
AS $function$
DECLARE
  v_filter text;
BEGIN
  IF cardinality(p_event_types) = 0 THEN
    RETURN NOT starts_with(p_type, 'platform.');
  END IF;
  FOREACH v_filter IN ARRAY p_event_types LOOP
    IF v_filter = p_type OR (right(v_filter, 2) = '.*' AND starts_with(p_type, left(v_filter, -1))) THEN
      RETURN true;
    END IF;
  END LOOP;
  RETURN false;
END
$function$;
