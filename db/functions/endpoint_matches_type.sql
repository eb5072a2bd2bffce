-- endpoint_matches_type: whether an endpoint's event-type filter takes an event of this type.
--
-- Inputs:  p_event_types  the endpoint's eventTypes (exact types, or prefixes ending in `.*`)
--          p_type         the event's type
-- Outputs: true when the filter takes the type.
-- Effects: none (IMMUTABLE; a single expression, so the planner inlines it into the caller).
-- Locks:   none.
--
-- The one rule, asked by fan-out (fan_out_targets) and by a backfill: an empty filter means every
-- type except operational events (platform.*), so a catch-all endpoint never receives a type it did
-- not know existed; those only reach endpoints that name them, exactly or by an `x.*` prefix.
CREATE OR REPLACE FUNCTION endpoint_matches_type(p_event_types text[], p_type text)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
  SELECT (cardinality(p_event_types) = 0 AND NOT starts_with(p_type, 'platform.'))
      OR p_type = ANY(p_event_types)
      OR EXISTS (SELECT 1 FROM unnest(p_event_types) f WHERE right(f, 2) = '.*' AND starts_with(p_type, left(f, -1)))
$function$;
