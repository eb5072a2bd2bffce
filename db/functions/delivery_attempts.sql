-- delivery_attempts: every attempt of one delivery, wherever the attempt is stored.
--
-- An attempt is a row of `attempts`, or, for a delivery whose first try succeeded, the
-- first_try_* columns of the delivery itself (migration 20261204000045; which attempts are stored
-- there is attempt_stored_in_delivery's to say): listed here as the attempt it was, number 1,
-- trigger `initial`, outcome `success`, with the delivery's uuid as its id, which the API names
-- `att_` followed by the delivery id's suffix (a TypeID's suffix is its UUIDv7, so it parses and
-- sorts as any attempt id). That migration's `down` writes the row back with the same id and
-- values, in its own SQL, which a released migration keeps for ever: these values stay as they are.
-- A row's trigger and outcome are stored as codes (attempt_triggers, attempt_outcomes) and listed
-- as their words.
-- Every reader of attempts reads them here, through their deliveries: the API and the portal
-- (src/store/deliveries-store.ts), endpoint statistics and retention's counts.
-- Inputs:  a delivery id.
-- Outputs: the columns of `attempts` but tenant_id (unwritten since migration 20261203000042),
--          trigger and outcome as words, in no order.
-- Effects: none. A SQL function that PostgreSQL inlines: called LATERAL beside deliveries, each
--          branch is an index lookup by the caller's delivery id, and `attempts` is pruned to the
--          partition of that id at run time. (A view or a function over all attempts could not be:
--          a UNION ALL branch with a WHERE is not pulled up into a join, so the deliveries branch
--          was scanned whole.)
-- Locks:   none.
CREATE OR REPLACE FUNCTION delivery_attempts(p_delivery_id uuid)
RETURNS TABLE (
  id uuid, delivery_id uuid, attempt_number integer, trigger text, started_at timestamptz, duration_ms integer,
  status_code integer, outcome text, error_class text, error_message text, response_excerpt text,
  next_attempt_at timestamptz
)
LANGUAGE sql
STABLE PARALLEL SAFE
AS $function$
SELECT a.id, a.delivery_id, a.attempt_number, (attempt_triggers())[a.trigger], a.started_at, a.duration_ms,
       a.status_code::integer, (attempt_outcomes())[a.outcome], a.error_class, a.error_message, a.response_excerpt,
       a.next_attempt_at
  FROM attempts a WHERE a.delivery_id = p_delivery_id
UNION ALL
SELECT d.id, d.id, 1, 'initial', d.first_try_started_at, d.first_try_duration_ms,
       d.first_try_status_code::integer, 'success', NULL, NULL, d.first_try_excerpt, NULL
  FROM deliveries d
 WHERE d.id = p_delivery_id AND d.first_try_started_at IS NOT NULL
$function$;
