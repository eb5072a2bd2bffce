-- attempt_outcomes: how an attempt can end, in the order of their codes.
--
-- `attempts.outcome` stores an outcome as its 1-based place in this list (migration
-- 20261207000056): array_position(attempt_outcomes(), word) writes it, (attempt_outcomes())[code]
-- reads it. A code never changes meaning, so a new outcome is appended, and the migration that
-- allows it widens the column's check.
-- Inputs:  none.
-- Outputs: the outcomes' words.
-- Effects: none. IMMUTABLE: inlined as a constant wherever it is called.
-- Locks:   none.
CREATE OR REPLACE FUNCTION attempt_outcomes()
RETURNS text[]
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT ARRAY['success', 'retry', 'terminal']
$function$;
