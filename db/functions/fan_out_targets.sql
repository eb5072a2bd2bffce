-- fan_out_targets: the endpoints an event goes to.
--
-- Inputs:  p_tenant_id, p_type  the event's tenant and type.
-- Outputs: one fan_out_target (endpoint_id, active, per_message, max_age_seconds) per endpoint of
--          the tenant, not deleted, whose filter matches the type, ordered by endpoint id: the
--          order in which callers hand out their delivery ids.
-- Effects: none (STABLE).
-- Locks:   none.
--
-- An empty filter means every type except operational events (platform.*): a catch-all endpoint
-- never receives a type it did not know existed; those only reach endpoints that name them,
-- exactly or by an `x.*` prefix. Disabled endpoints are included: they get a dead delivery
-- (see fan_out_write). Planned generically with sequential scans priced out, so its one plan is the
-- endpoints_tenant index whatever the statistics say about how endpoints spread over tenants.
CREATE OR REPLACE FUNCTION fan_out_targets(p_tenant_id text, p_type text)
RETURNS fan_out_target[]
LANGUAGE plpgsql
STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $function$
BEGIN
  RETURN (
    SELECT coalesce(array_agg(ROW(e.id, e.status <> 'disabled', e.ordering = 'per-message',
                                  (e.retry_policy->>'maxEventAgeSeconds')::int)::fan_out_target ORDER BY e.id),
                    '{}')
      FROM endpoints e
     WHERE e.tenant_id = p_tenant_id AND e.deleted_at IS NULL
       AND ((cardinality(e.event_types) = 0 AND NOT starts_with(p_type, 'platform.'))
            OR p_type = ANY(e.event_types)
            OR EXISTS (SELECT 1 FROM unnest(e.event_types) f WHERE right(f, 2) = '.*' AND starts_with(p_type, left(f, -1))))
  );
END
$function$;
