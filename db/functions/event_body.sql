-- event_body: the exact bytes every endpoint receives for an event, on every attempt.
--
-- The envelope {"id","type","timestamp","messageId","data"} is built here from the event's
-- columns: only `data` is stored with them, as the JSON text received or made, never parsed. An
-- event written by release 0.3.0 or earlier holds the whole envelope in `body` and is sent as stored.
--
-- This file holds two signatures of one rule (docs/operations/functions.md):
--   event_body(events)  for a reader that has the row (admission, hand-off, the API), whose id is
--                       stored as a uuid (migration 20261206000055) and named by its TypeID;
--   event_body(p_body, p_id, p_type, p_created_at, p_message_id, p_data)  for a writer that has
--                       the columns before the row exists (fan-out filters at publish and intake),
--                       p_id being the TypeID.
-- Inputs:  the event's stored body (NULL for events the api wrote after release 0.3.0), id (the TypeID),
--          type, creation time (whole milliseconds: it is the API's or the intake's clock),
--          message id, and data (NULL when the event has no `data` member: the envelope then has
--          none).
-- Outputs: the body, text.
-- Effects: none. STABLE, not IMMUTABLE: to_char is STABLE. Both are SQL functions that PostgreSQL
--          inlines, so a reader pays for the concatenation and the id's TypeID (typeid_of, a few
--          microseconds) only, and only when it selects the body.
-- Locks:   none.
--
-- The escapes of to_json for text (", \, \b, \f, \n, \r, \t, \u00XX below U+0020) are
-- JSON.stringify's, and timestamps are written as Date.prototype.toISOString writes them, so a body
-- built here is byte for byte the envelope that releases up to 0.3.0 stored
-- (test/integration/event-body.test.ts).
CREATE OR REPLACE FUNCTION event_body(p_body text, p_id text, p_type text, p_created_at timestamptz, p_message_id text, p_data text)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $function$
SELECT coalesce(p_body,
  '{"id":' || to_json(p_id)::text || ',"type":' || to_json(p_type)::text
  || ',"timestamp":"' || to_char(p_created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  || '","messageId":' || coalesce(to_json(p_message_id)::text, 'null')
  || coalesce(',"data":' || p_data, '') || '}')
$function$;

CREATE OR REPLACE FUNCTION event_body(p_event events)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $function$
SELECT event_body(p_event.body, typeid_of('evt', p_event.id), p_event.type, p_event.created_at, p_event.message_id, p_event.data)
$function$;
