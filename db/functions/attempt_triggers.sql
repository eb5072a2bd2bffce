-- attempt_triggers: what can start an attempt, in the order of their codes.
--
-- `attempts.trigger` stores a trigger as its 1-based place in this list (migration
-- 20261207000056): array_position(attempt_triggers(), word) writes it, (attempt_triggers())[code]
-- reads it. A code never changes meaning, so a new trigger is appended, and the migration that
-- allows it widens the column's check.
-- Inputs:  none.
-- Outputs: the triggers' words.
-- Effects: none. IMMUTABLE: inlined as a constant wherever it is called.
-- Locks:   none.
CREATE OR REPLACE FUNCTION attempt_triggers()
RETURNS text[]
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT ARRAY['initial', 'retry', 'replay']
$function$;
