-- attempt_stored_in_delivery: whether an attempt is stored in its delivery's first_try_* columns
-- rather than as a row of `attempts`.
--
-- A delivery's first try that succeeded is: most deliveries have exactly that one attempt, and
-- everything else about it is on the delivery already. An attempts row with its index entry costs
-- ~220 bytes; the columns cost ~20 (docs/performance.md). db/functions/delivery_attempts.sql lists
-- it back as an attempt with exactly these values (trigger `initial`, number 1, outcome `success`).
-- Inputs:  the attempt's trigger, number (the delivery's attempt count when it started) and outcome.
-- Outputs: true to store it in the delivery.
-- Effects: none. IMMUTABLE: the writers (record_attempt_v4, record_successes_v4) call it per row.
-- Locks:   none.
CREATE OR REPLACE FUNCTION attempt_stored_in_delivery(p_trigger text, p_attempt_number integer, p_outcome text)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $function$
SELECT p_trigger = 'initial' AND p_attempt_number = 1 AND p_outcome = 'success'
$function$;
