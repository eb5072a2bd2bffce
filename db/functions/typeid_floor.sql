-- typeid_floor: the smallest TypeID with this prefix made at or after p_at.
--
-- Inputs:  p_prefix (e.g. 'evt'), p_at.
-- Outputs: the prefix, '_', the 48-bit millisecond time in 10 Crockford base32 characters, then
--          zeros: ids made in the millisecond p_at sort at or above it (under the "C" collation).
-- Effects: none (IMMUTABLE).
-- Locks:   none.
--
-- The bounds of partitions keyed by TypeIDs are made with it (partition_floor); src/domain/retention.ts
-- computes the same in TypeScript.
CREATE OR REPLACE FUNCTION typeid_floor(p_prefix text, p_at timestamp with time zone)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT p_prefix || '_' || string_agg(substr('0123456789abcdefghjkmnpqrstvwxyz',
                                            (((floor(extract(epoch FROM p_at) * 1000))::bigint >> (5 * (9 - i))) & 31)::int + 1, 1),
                                     '' ORDER BY i) || '0000000000000000'
  FROM generate_series(0, 9) i
$function$;
