-- event_id_range: the least and greatest event id of these deliveries, the bounds a statement
-- passes to event_in_range.
--
-- Inputs:  p_delivery_ids, deliveries the caller has just picked and locked (next_due).
-- Outputs: events_from, events_to; both NULL for no delivery.
-- Effects: none. Locks: none beyond reading.
--
-- Call it in a statement of its own, after the one that picked them. next_due reads in a
-- snapshot newer than its calling statement's: a delivery committed in between is picked and
-- locked there, but a read of `deliveries` in the picking statement itself does not see it, and
-- its bounds would leave it out of the writes (found in review, 6 December).
--
-- PL/pgSQL, so its plan is kept for the session (a SQL function that is not inlined plans its
-- query again on every call), generic and by key, as its callers' plans are.
CREATE OR REPLACE FUNCTION event_id_range(p_delivery_ids uuid[], OUT events_from uuid, OUT events_to uuid)
LANGUAGE plpgsql
STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
AS $function$
BEGIN
  -- Aggregated over the deliveries found by key: written as min() and max() over the table, the
  -- planner may read deliveries_event_endpoint from either end until an id matches, a walk of the
  -- whole table once it has grown (plans-on-growing-tables.test.ts). Sorted, not min() and max():
  -- PostgreSQL 15 has neither for uuid.
  SELECT s.ids[1], s.ids[cardinality(s.ids)] INTO events_from, events_to
    FROM (SELECT array_agg(x.event_id ORDER BY x.event_id) AS ids
            FROM (SELECT d.event_id FROM deliveries d WHERE d.id = ANY(p_delivery_ids) OFFSET 0) x) s;
END
$function$;
