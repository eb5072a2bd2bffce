-- typeid_of: the TypeID with this prefix that a stored uuid encodes.
--
-- Inputs:  p_prefix (e.g. 'ep'), p_id, a uuid as the stores keep ids of the kinds that
--          docs/architecture.md ("Ids in the database") lists.
-- Outputs: p_prefix, '_', then the 128 bits in 26 Crockford base32 characters (the first holds 3
--          bits, the rest 5), as the API writes the id; NULL for a NULL p_id.
-- Effects: none (IMMUTABLE). Locks: none.
--
-- For people and reports reading the tables (docs/runbook.md); for delivery_attempts, which names
-- a first try stored in its delivery by the delivery's id; and for event_body(events) and
-- publish_event, whose envelope names the event by its TypeID. The platform converts every other
-- id in TypeScript (src/domain/ids.ts).
CREATE OR REPLACE FUNCTION typeid_of(p_prefix text, p_id uuid)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
AS $function$
DECLARE
  v_letters constant text[] := '{0,1,2,3,4,5,6,7,8,9,a,b,c,d,e,f,g,h,j,k,m,n,p,q,r,s,t,v,w,x,y,z}'::text[];
  v_hex constant text := replace(p_id::text, '-', '');
  h constant int8 := ('x' || left(v_hex, 16))::bit(64)::int8;
  l constant int8 := ('x' || right(v_hex, 16))::bit(64)::int8;
BEGIN
  RETURN p_prefix || '_' || array_to_string(ARRAY[
    v_letters[((h >> 61) & 7)::int + 1],
    v_letters[((h >> 56) & 31)::int + 1],
    v_letters[((h >> 51) & 31)::int + 1],
    v_letters[((h >> 46) & 31)::int + 1],
    v_letters[((h >> 41) & 31)::int + 1],
    v_letters[((h >> 36) & 31)::int + 1],
    v_letters[((h >> 31) & 31)::int + 1],
    v_letters[((h >> 26) & 31)::int + 1],
    v_letters[((h >> 21) & 31)::int + 1],
    v_letters[((h >> 16) & 31)::int + 1],
    v_letters[((h >> 11) & 31)::int + 1],
    v_letters[((h >> 6) & 31)::int + 1],
    v_letters[((h >> 1) & 31)::int + 1],
    v_letters[(((h & 1) << 4) | ((l >> 60) & 15))::int + 1],
    v_letters[((l >> 55) & 31)::int + 1],
    v_letters[((l >> 50) & 31)::int + 1],
    v_letters[((l >> 45) & 31)::int + 1],
    v_letters[((l >> 40) & 31)::int + 1],
    v_letters[((l >> 35) & 31)::int + 1],
    v_letters[((l >> 30) & 31)::int + 1],
    v_letters[((l >> 25) & 31)::int + 1],
    v_letters[((l >> 20) & 31)::int + 1],
    v_letters[((l >> 15) & 31)::int + 1],
    v_letters[((l >> 10) & 31)::int + 1],
    v_letters[((l >> 5) & 31)::int + 1],
    v_letters[((l >> 0) & 31)::int + 1]
  ], '');
END
$function$;
