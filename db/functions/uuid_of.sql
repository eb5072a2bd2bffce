-- uuid_of: the uuid a TypeID with this prefix encodes, as the stores keep ids of the kinds that
-- docs/architecture.md ("Ids in the database") lists; typeid_of's inverse.
--
-- Inputs:  p_prefix (e.g. 'dlv'), p_id, a TypeID as the API writes it.
-- Outputs: the 128 bits its 26 Crockford base32 letters hold after two zero bits; NULL when p_id is
--          not a TypeID with that prefix, as src/domain/ids.ts (uuidOfId) answers.
-- Effects: none (IMMUTABLE). Locks: none.
--
-- For a column that keeps TypeIDs as the API wrote them, matched against a stored id: the audit
-- log's targets (src/store/tenant-scope.ts). An index on the stored id serves the match.
CREATE OR REPLACE FUNCTION uuid_of(p_prefix text, p_id text)
RETURNS uuid
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $function$
SELECT CASE WHEN length(p_id) = length(p_prefix) + 27 AND starts_with(p_id, p_prefix || '_')
                 AND right(p_id, 26) ~ '^[0-7][0-9a-hjkmnp-tv-z]{25}$' THEN (
  SELECT (lpad(to_hex(substring(x.bits FROM 3 FOR 64)::int8), 16, '0') || lpad(to_hex(substring(x.bits FROM 67 FOR 64)::int8), 16, '0'))::uuid
    FROM (SELECT string_agg(((strpos('0123456789abcdefghjkmnpqrstvwxyz', substr(right(p_id, 26), i, 1)) - 1)::bit(5))::text, '' ORDER BY i)::bit(130) AS bits
            FROM generate_series(1, 26) i) x)
END
$function$;
