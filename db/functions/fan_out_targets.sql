-- fan_out_targets: the endpoints an event goes to.
--
-- Inputs:  p_tenant_id, p_type  the event's tenant (its uuid as text) and type.
--          p_body       the event's body (event_body: {id, type, timestamp, messageId, data}), which an
--                       endpoint's content filter (filter_path) is matched against, as
--                       filter_document reads it; parsed only when the tenant has an endpoint with a
--                       filter. NULL: filters not applied.
-- Outputs: one fan_out_target (endpoint_id, active, per_message, max_age_seconds) per endpoint of
--          the tenant, not deleted, whose filter matches the type, ordered by endpoint id: the
--          order in which callers hand out their delivery ids.
-- Effects: none (STABLE).
-- Locks:   none.
--
-- Whether a filter takes a type is endpoint_matches_type's rule (a backfill asks the same one).
-- Disabled endpoints are included: they get a dead delivery
-- (see fan_out_write). Planned generically with sequential scans priced out, so its one plan is the
-- endpoints_tenant index whatever the statistics say about how endpoints spread over tenants. And
-- never in parallel: a generic plan prices a tenant at the average tenant's endpoints, so beside one
-- very large tenant it chose a parallel scan, worker processes started for every publish
-- (docs/performance.md, "A parallel plan per publish").
--
-- This file holds two signatures: (text, text) is the one of release 0.1.0 and applies no content
-- filter. No release since calls it; it stays because released migrations' downs alter it by
-- signature (docs/operations/functions.md, "Except"). For the same reason both take the tenant's
-- id as text, cast here (migration 20261206000054).
CREATE OR REPLACE FUNCTION fan_out_targets(p_tenant_id text, p_type text, p_body text)
RETURNS fan_out_target[]
LANGUAGE plpgsql
STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET max_parallel_workers_per_gather = 0
AS $function$
BEGIN
  RETURN (
    SELECT coalesce(array_agg(ROW(e.id, e.status <> 'disabled', e.ordering = 'per-message',
                                  (e.retry_policy->>'maxEventAgeSeconds')::int)::fan_out_target ORDER BY e.id),
                    '{}')
      FROM endpoints e
     WHERE e.tenant_id = p_tenant_id::uuid AND e.deleted_at IS NULL
       AND endpoint_matches_type(e.event_types, p_type)
       -- The body is parsed once (an InitPlan, run on first use), and only when a filter asks.
       AND (e.filter_path IS NULL OR p_body IS NULL OR jsonb_path_match((SELECT filter_document(p_body)), e.filter_path))
  );
END
$function$;

CREATE OR REPLACE FUNCTION fan_out_targets(p_tenant_id text, p_type text)
RETURNS fan_out_target[]
LANGUAGE sql
STABLE
AS $function$
  SELECT fan_out_targets(p_tenant_id, p_type, NULL)
$function$;
