-- typeid_time: the creation time a TypeID carries.
--
-- Inputs:  p_id, any text.
-- Outputs: the time in its first 10 base32 characters after the prefix; NULL for anything that is
--          not a TypeID.
-- Effects: none (IMMUTABLE).
-- Locks:   none.
CREATE OR REPLACE FUNCTION typeid_time(p_id text)
RETURNS timestamp with time zone
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT CASE WHEN p_id ~ '^[a-z]([a-z_]*[a-z]){0,1}_[0-7][0-9a-hjkmnp-tv-z]{25}$' THEN
  to_timestamp((SELECT sum((strpos('0123456789abcdefghjkmnpqrstvwxyz', substr(p_id, length(p_id) - 25 + i, 1)) - 1)::bigint << (5 * (9 - i)))
                  FROM generate_series(0, 9) i) / 1000.0)
END
$function$;
