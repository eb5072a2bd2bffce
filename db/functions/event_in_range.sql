-- event_in_range: the event with this id, for a statement that knows, before it starts, the lowest
-- and highest event id it will look up.
--
-- A join to `events` by a value read from another row (ev.id = d.event_id) can only prune
-- partitions as it runs: PostgreSQL starts an index scan of every partition each time the
-- statement runs, and uses one. With RETENTION_DAYS at 30 that is ~40 partitions, and the cost
-- grows with every day kept (docs/performance.md, "Hand-offs open only their events' days").
-- Bounds passed as the caller's variables are known at the statement's start, so only the
-- partitions between them get an index scan: usually one, every day between an old event and
-- today's when a batch holds both. PostgreSQL 15 still locks every partition of a cached plan
-- before running it; that part stays.
--
-- Inputs:  p_id, the event; p_from and p_to, bounds with p_from <= p_id <= p_to (the least and
--          greatest event id of the caller's rows, event_id_range). An id outside them finds
--          nothing.
-- Outputs: the event's row, or none.
-- Effects: none. Locks: none beyond reading.
--
-- Called as `CROSS JOIN LATERAL event_in_range(d.event_id, v_from, v_to) ev` from PL/pgSQL, with
-- v_from and v_to variables of the function. PostgreSQL inlines it (one SELECT, SQL, STABLE), and
-- OFFSET 0 keeps the inlined query apart from the caller's joins, so the row that names the event
-- stays the outer side and the event is read by its key: flattened, a plan may walk events from
-- p_from to p_to instead.
CREATE OR REPLACE FUNCTION event_in_range(p_id uuid, p_from uuid, p_to uuid)
RETURNS SETOF events
LANGUAGE sql
STABLE PARALLEL SAFE
AS $function$
SELECT * FROM events e WHERE e.id = p_id AND e.id >= p_from AND e.id <= p_to OFFSET 0
$function$;
