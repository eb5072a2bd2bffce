-- intake_record_repeats: receipts for byte-identical repeats of bodies a source
-- already sent, without parsing them (the cheap path of a provider retry storm).
--
-- Inputs:  parallel arrays, one entry per repeat: p_receipt_ids, p_tenant_ids (uuids as text:
--          migration 20261202000026's down drops this signature), p_source_ids, p_origins,
--          p_digests (the body's digest).
-- Outputs: (id, event_id) per receipt written, the event's id as its uuid's text.
-- Effects: receipts: a 'duplicate' receipt against the event its digest's first receipt names. A
--          digest without any receipt (gone with its retention window) gets no row, and the caller
--          takes the callback as new.
-- Locks:   none beyond the rows it inserts.
--
-- Planned generically (plan_cache_mode), foreign-key checks included.
CREATE OR REPLACE FUNCTION intake_record_repeats(
  p_receipt_ids text[],
  p_tenant_ids text[],
  p_source_ids text[],
  p_origins text[],
  p_digests text[]
)
RETURNS TABLE(id text, event_id text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $function$
BEGIN
  -- A repeat is recorded against the event its first receipt names; a digest without any
  -- receipt (gone with its retention window) gets no row, and the caller takes it as new.
  RETURN QUERY
  INSERT INTO receipts AS n (id, tenant_id, source_id, event_id, outcome, origin, body_digest)
  SELECT i.receipt_id, i.tenant_id::uuid, i.source_id, r.event_id, 'duplicate', i.origin, i.body_digest
    FROM unnest(p_receipt_ids, p_tenant_ids, p_source_ids, p_origins, p_digests)
         AS i(receipt_id, tenant_id, source_id, origin, body_digest)
   CROSS JOIN LATERAL (SELECT f.event_id FROM receipts f
                        WHERE f.source_id = i.source_id AND f.body_digest = i.body_digest LIMIT 1) r
  RETURNING n.id, n.event_id::text;
END
$function$;
