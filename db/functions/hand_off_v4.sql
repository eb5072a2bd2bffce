-- hand_off_v4: a slot that just finished takes its endpoint's next due deliveries.
--
-- Instead of sending the endpoint back through admission and Redis, a slot whose attempt was
-- recorded starts the endpoint's next delivery itself, whatever the outcome, when next_due (the
-- one rule admission uses too) says the endpoint has room.
--
-- Inputs:  p_endpoint_ids and p_slots, parallel: each endpoint once, with how many of its slots
--          are free to go on; p_threshold (circuit); p_lease_ms, the lease of the in-flight attempt.
-- Outputs: each handed delivery with what its attempt needs (src/delivery/sql/claimed.ts) and its
--          claim's token.
-- Effects: deliveries pending -> in_flight in their queue rows only: the claim's attempt number
--          (the delivery's attempt_count + 1), its time and its lease (claim_in_queue;
--          `deliveries` is written again only with the attempt's result).
-- Locks:   the picked deliveries' rows and their queue rows (next_due). The claim is written by a
--          second statement, in a snapshot taken after the locks are held, so it copies the
--          delivery's columns as they are now (a lost attempt's count, a replay's trigger), which
--          a row that is not the target of an UPDATE shows only in a fresh snapshot.
-- Plans:   generic, joining by nested loop only, with sequential scans priced out: every table is
--          reached by key, and a plan cached while the tables were small (a new database, a day's
--          new partition) must stay so as they grow. Planned in a fresh database's first second,
--          this statement hashed all of `deliveries` to find one row: 32 ms per hand-off at 40,000
--          deliveries (docs/performance.md, "A plan made on an empty table"). With sequential scans
--          priced out it merge-joined the picked ids with all of deliveries_pkey instead, a walk of
--          every delivery per hand-off ("Joins that walked the whole table by its index").
--          Events are read through event_in_range, between the picked deliveries' least and
--          greatest event id (event_id_range), so the writes start index scans only on the
--          partitions of `events` between them, usually one.
--
-- The columns of a delivery in flight are those of src/delivery/sql/claimed.ts, ending with the
-- stored trace contexts (its event's fan-out, and a replay's own), so an attempt's span needs no
-- read of its own, then the claim's token (lease_token), which its result is recorded under
-- (claim_held_v2). Its `status` and `attempt_count` are the claim's. A claim kept in the queue is
-- why this is a new function: release 0.5.0's processes recorded only claims written to
-- `deliveries` (hand_off_v3, dropped by migration 20261205000050).
CREATE OR REPLACE FUNCTION hand_off_v4(p_endpoint_ids uuid[], p_slots integer[], p_threshold integer, p_lease_ms integer)
RETURNS TABLE (
  id uuid, tenant_id uuid, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id uuid, event_type text, event_created_at timestamptz, body text,
  ep_id uuid, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text,
  lease_token bigint
)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
  v_picked uuid[];
  v_events_from uuid;
  v_events_to uuid;
BEGIN
  SELECT array_agg(n.delivery_id) INTO v_picked
    FROM unnest(p_endpoint_ids, p_slots) AS s(endpoint_id, slots)
         CROSS JOIN LATERAL next_due(s.endpoint_id, s.slots, p_threshold, true) n;
  IF v_picked IS NULL THEN
    RETURN;
  END IF;
  -- The range of their events' ids, so that the writes open only the days of `events` between
  -- them (event_in_range), read after the pick (event_id_range says why).
  SELECT r.events_from, r.events_to INTO v_events_from, v_events_to FROM event_id_range(v_picked) r;
  RETURN QUERY
  WITH handed AS (
    UPDATE delivery_queue q
       SET status = 'in_flight', attempt_count = d.attempt_count + 1, claimed_at = now(),
           lease_until = now() + make_interval(secs => p_lease_ms / 1000.0)
      FROM deliveries d CROSS JOIN LATERAL event_in_range(d.event_id, v_events_from, v_events_to) ev, endpoints ep
     WHERE q.delivery_id = ANY(v_picked) AND d.id = ANY(v_picked) AND d.id = q.delivery_id
       AND ep.id = d.endpoint_id
    RETURNING d.id, d.tenant_id, q.status, q.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger,
              d.deadline_at, d.succeeded_at, ev.id, ev.type, ev.created_at, event_body(ev),
              ep.id, ep.url, ep.status, ep.retry_policy, ep.secret_enc, ep.previous_secret_enc,
              ep.previous_secret_expires_at, ep.deleted_at, ev.trace_parent, d.trace_parent, lease_token(q.lease_until)
  )
  SELECT * FROM handed;
END $$;
