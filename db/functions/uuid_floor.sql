-- uuid_floor: the smallest uuid of an id made at or after p_at, as the stores keep the kinds of ids
-- docs/architecture.md ("Ids in the database") lists.
--
-- Inputs:  p_at.
-- Outputs: the 48-bit millisecond time in the first 12 hex digits (the UUIDv7 a TypeID encodes
--          starts with it), then zeros: typeid_floor's value, stored as a uuid.
-- Effects: none (IMMUTABLE). Locks: none.
--
-- src/domain/retention.ts computes the same in TypeScript (uuidFloor).
CREATE OR REPLACE FUNCTION uuid_floor(p_at timestamp with time zone)
RETURNS uuid
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT (lpad(to_hex(floor(extract(epoch FROM p_at) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$function$;
