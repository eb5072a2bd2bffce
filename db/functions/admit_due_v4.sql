-- admit_due_v4: one admission round. pending -> queued (for Redis) or -> in_flight (for a slot of
-- this process), per endpoint no more than next_due says it has room for.
--
-- Inputs:  p_threshold (circuit), p_batch (most deliveries one endpoint gets per round, for fairness
--          between endpoints), p_queued_lease_seconds (lease on `queued`: how long Redis may hold a
--          job before the sweep takes it back), p_local (how many admitted deliveries this process
--          can start at once without Redis), p_in_flight_lease_ms (lease of such an attempt),
--          p_all_local (Redis is failing: everything runs locally and nothing is queued).
-- Outputs: one row per admitted delivery: `local` ones are in flight for this process, with what
--          an attempt needs (src/delivery/sql/claimed.ts) and their claim's token; the others are
--          queued and need a job.
--          Local slots go by fair share (below), up to half an endpoint's concurrency unless
--          everything runs locally. Then, when everything runs locally, one row without an id per
--          endpoint that had due work and room but got no slot of this process (`local` false,
--          `tenant_id`, `ep_id`): work waiting for a slot, which the caller's running slots yield
--          to (src/outbound/fair-share.ts). Every row carries `skipped`, the endpoints with due work
--          and room that another process was admitting; when nothing was admitted or waits, one row without
--          an id and with `local` NULL says it. Callers that only read rows with an id see what
--          they always saw.
-- Fair share: this process's free slots go to the tenant with the fewest deliveries in flight
--          first (queued + in_flight on its endpoints that have due work, as next_due counts them),
--          one delivery at a time, and within a tenant to the endpoint with the fewest in flight:
--          the k-th delivery picked for an endpoint ranks at (the tenant's busy count + its place
--          in the tenant's round-robin) and, inside the tenant, at (the endpoint's busy count + k).
--          A tenant with nothing in flight ranks first, whatever another tenant's backlog.
-- Effects: deliveries pending -> queued, in `deliveries` (the triggers copy it into the queue);
--          pending -> in_flight in the queue row only, with the claim's attempt number and time
--          (claim_in_queue: `deliveries` is written again only with the attempt's result); leases;
--          the rate-limit buckets of endpoints that were admitted to.
-- Locks:   no platform-wide lock. Statement 1 try-locks each candidate endpoint with
--          pg_try_advisory_xact_lock(727002, uuid_hash(endpoint_id)) and skips one that another
--          process holds (the caller runs another round shortly). Statement 2 runs in a snapshot
--          taken after the locks are held (PL/pgSQL gives each statement of a VOLATILE function a
--          fresh one), so busy counts, rate tokens and the half-open probe are exact across
--          processes. Row locks on the admitted deliveries and their queue rows (next_due).
--          Statement 3 writes them in a snapshot taken after those locks are held.
--
-- Plans:   generic, with sequential scans priced out: every table is reached by key or by an index
--          of the queue, and a plan cached while the tables were small must stay so when they grow.
--          Statement 1 is planned with sorts priced out as well: planned on a near-empty queue, it
--          read every pending row through delivery_queue_deadline and sorted them instead of one
--          descent of delivery_queue_due per endpoint, so a round cost O(backlog) (up to ~350 ms
--          with 100,000 pending, docs/performance.md "Fair share under a drain"). Joins are nested
--          loops only: the writes once merge-joined their few picked ids with all of deliveries_pkey,
--          every delivery read on every round ("Joins that walked the whole table by its index").
--          The writes read events through event_in_range, between the picked deliveries' least
--          and greatest event id (event_id_range), so they start index scans only on the
--          partitions of `events` between them, usually one.
--
-- Cost follows endpoints with pending work, not endpoints that exist: candidates come from
-- pending_endpoints, a skip scan over delivery_queue_due, one index descent per endpoint with a
-- pending delivery. The round does not wait for its WAL flush: admitted rows promise nobody
-- anything, and lost in a crash of PostgreSQL they are simply pending again.
--
-- The columns of a delivery in flight are those of src/delivery/sql/claimed.ts, ending with the
-- stored trace contexts (its event's fan-out, and a replay's own), so an attempt's span needs no
-- read of its own, then the claim's token (lease_token), which its result is recorded under
-- (claim_held_v2). Its `status` and `attempt_count` are the claim's. A claim kept in the queue is
-- why this is a new function: release 0.5.0's processes recorded only claims written to
-- `deliveries` (admit_due_v3, dropped by migration 20261205000050).
CREATE OR REPLACE FUNCTION admit_due_v4(
  p_threshold integer, p_batch integer, p_queued_lease_seconds integer,
  p_local integer, p_in_flight_lease_ms integer, p_all_local boolean
) RETURNS TABLE (
  local boolean, id uuid, tenant_id uuid, status text, attempt_count integer, attempt_base integer,
  replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
  event_id uuid, event_type text, event_created_at timestamptz, body text,
  ep_id uuid, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
  previous_secret_expires_at timestamptz, deleted_at timestamptz, event_trace_parent text, trace_parent text,
  lease_token bigint, skipped integer
)
LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan SET enable_seqscan = off
  SET enable_hashjoin = off SET enable_mergejoin = off AS $$
#variable_conflict use_column
DECLARE
  v_ids uuid[];
  v_candidates integer;
  v_picked uuid[];
  v_local boolean[];
  v_picked_endpoints uuid[];
  v_picked_tenants uuid[];
  v_events_from uuid;
  v_events_to uuid;
  v_token_endpoints uuid[];
  v_tokens double precision[];
  v_sort text := current_setting('enable_sort');
BEGIN
  PERFORM set_config('synchronous_commit', 'off', true);

  -- 1. Candidates: endpoints whose earliest pending delivery is due and that have room
  --    (endpoint_room), each try-locked. In this snapshot, taken before the locks, room is only a
  --    first look: next_due says, in statement 2, what each endpoint may start.
  PERFORM set_config('enable_sort', 'off', true);
  WITH cand AS MATERIALIZED (
    SELECT pend.endpoint_id AS id FROM pending_endpoints() AS pend(endpoint_id)
     -- Only endpoints with room. A full one gets room when one of its slots ends, and that
     -- slot's process hands it on or wakes a round of its own. Asked after the due check
     -- (CASE fixes the order), so endpoints with only later work cost no call.
     WHERE CASE WHEN (SELECT q.next_attempt_at FROM delivery_queue q WHERE q.endpoint_id = pend.endpoint_id AND q.status = 'pending'
                       ORDER BY q.next_attempt_at LIMIT 1) <= now()
                THEN (SELECT r.free FROM endpoint_room(pend.endpoint_id, p_batch, p_threshold, false) r) > 0
                ELSE false END
  ), locked AS MATERIALIZED (
    SELECT c.id FROM cand c WHERE pg_try_advisory_xact_lock(727002, uuid_hash(c.id))
  )
  SELECT COALESCE((SELECT array_agg(l.id) FROM locked l), '{}'), (SELECT count(*) FROM cand)
    INTO v_ids, v_candidates;
  skipped := v_candidates - cardinality(v_ids);
  PERFORM set_config('enable_sort', v_sort, true);

  -- 2. In a snapshot taken after the locks are held: what each endpoint has room for, and which
  --    of it goes to a slot of this process. next_due locks the picked rows.
  IF cardinality(v_ids) > 0 THEN
    WITH picked AS MATERIALIZED (
        SELECT n.delivery_id AS id, l.endpoint_id, (SELECT ep.tenant_id FROM endpoints ep WHERE ep.id = l.endpoint_id) AS tenant_id,
               n.endpoint_rank, n.busy, n.tokens,
               p_all_local OR n.endpoint_rank <= ceil(n.max_concurrency / 2.0) - n.busy AS local_ok
          FROM unnest(v_ids) AS l(endpoint_id) CROSS JOIN LATERAL next_due(l.endpoint_id, p_batch, p_threshold, false) n
    ), shared AS MATERIALIZED (
        -- Fair share (see the header): the tenant's busy count plus the delivery's place in the
        -- tenant's own round-robin, where endpoints with fewer in flight come first.
        SELECT pk.*,
               sum(pk.busy) FILTER (WHERE pk.endpoint_rank = 1) OVER (PARTITION BY pk.tenant_id)
                 + row_number() OVER (PARTITION BY pk.tenant_id ORDER BY pk.busy + pk.endpoint_rank, pk.endpoint_id, pk.id) AS fair_rank
          FROM picked pk
    ), ranked AS MATERIALIZED (
        SELECT sh.id, sh.endpoint_id, sh.tenant_id,
               sh.local_ok AND row_number() OVER (PARTITION BY sh.local_ok ORDER BY sh.fair_rank, sh.busy + sh.endpoint_rank, sh.id) <= p_local AS local
          FROM shared sh
    )
    -- One pass over each: the arrays of one aggregate pass keep their rows in the same order.
    SELECT r.ids, r.locals, r.endpoint_ids, r.tenant_ids, t.endpoint_ids, t.tokens
      INTO v_picked, v_local, v_picked_endpoints, v_picked_tenants, v_token_endpoints, v_tokens
      FROM (SELECT array_agg(rk.id) AS ids, array_agg(rk.local) AS locals, array_agg(rk.endpoint_id) AS endpoint_ids,
                   array_agg(rk.tenant_id) AS tenant_ids FROM ranked rk) r,
           (SELECT array_agg(g.endpoint_id) AS endpoint_ids, array_agg(g.tokens) AS tokens
              FROM (SELECT pk.endpoint_id, min(pk.tokens) AS tokens FROM picked pk
                     WHERE pk.tokens IS NOT NULL GROUP BY pk.endpoint_id) g) t;
    -- The range of their events' ids, so that statement 3 opens only the days of `events` between
    -- them (event_in_range), read after the pick (event_id_range says why).
    SELECT r.events_from, r.events_to INTO v_events_from, v_events_to FROM event_id_range(v_picked) r;

    -- 3. The writes, in a snapshot taken after next_due locked the picked rows: a claim copies
    --    the delivery's columns as they are now (a result recorded since statement 2 began, a
    --    replay, a lost attempt's count), which only a fresh snapshot shows for the rows that
    --    are not the target of an UPDATE.
    RETURN QUERY
    WITH ranked AS MATERIALIZED (
        -- With each delivery's event, read in this statement's snapshot, taken after the pick. The
        -- array bounds the read whichever side the plan starts from, as below.
        SELECT r.*, d.event_id FROM unnest(v_picked, v_local, v_picked_endpoints, v_picked_tenants) AS r(id, local, endpoint_id, tenant_id)
          JOIN deliveries d ON d.id = r.id AND d.id = ANY(v_picked)
    ), claimed AS (
        -- A slot's claim: the queue row only (see Effects).
        UPDATE delivery_queue q SET
               status = 'in_flight', attempt_count = d.attempt_count + 1, claimed_at = now(),
               lease_until = now() + make_interval(secs => p_in_flight_lease_ms / 1000.0)
          FROM ranked r CROSS JOIN LATERAL event_in_range(r.event_id, v_events_from, v_events_to) ev, deliveries d, endpoints ep
         -- The arrays bound the reads whichever side the plan starts from.
         WHERE q.delivery_id = ANY(ARRAY(SELECT r2.id FROM ranked r2 WHERE r2.local)) AND q.delivery_id = r.id AND r.local
           AND d.id = ANY(ARRAY(SELECT r2.id FROM ranked r2 WHERE r2.local)) AND d.id = q.delivery_id
           AND ep.id = d.endpoint_id
        RETURNING true AS local, d.id, d.tenant_id, q.status, q.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger,
                  d.deadline_at, d.succeeded_at, ev.id AS event_id, ev.type AS event_type, ev.created_at AS event_created_at,
                  event_body(ev) AS body, ep.id AS ep_id, ep.url, ep.status AS ep_status, ep.retry_policy,
                  ep.secret_enc, ep.previous_secret_enc, ep.previous_secret_expires_at, ep.deleted_at,
                  ev.trace_parent AS event_trace_parent, d.trace_parent, lease_token(q.lease_until) AS lease_token
    ), queued AS (
        UPDATE deliveries d SET
               status = 'queued', lease_until = now() + make_interval(secs => p_queued_lease_seconds), updated_at = now()
          FROM ranked r CROSS JOIN LATERAL event_in_range(r.event_id, v_events_from, v_events_to) ev, endpoints ep
         WHERE d.id = ANY(ARRAY(SELECT r2.id FROM ranked r2 WHERE NOT r2.local)) AND d.id = r.id AND NOT r.local AND NOT p_all_local
           AND ep.id = d.endpoint_id
        RETURNING false AS local, d.id, d.tenant_id, d.status, d.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger,
                  d.deadline_at, d.succeeded_at, ev.id AS event_id, ev.type AS event_type, ev.created_at AS event_created_at,
                  NULL::text AS body, ep.id AS ep_id, ep.url, ep.status AS ep_status, ep.retry_policy,
                  ep.secret_enc, ep.previous_secret_enc, ep.previous_secret_expires_at, ep.deleted_at,
                  ev.trace_parent AS event_trace_parent, d.trace_parent, NULL::bigint AS lease_token
    ), admitted AS (
        SELECT * FROM claimed UNION ALL SELECT * FROM queued
    ), spent AS (
        -- Per endpoint on both sides before the join: joined by nested loop, two lists of
        -- deliveries would cost one times the other.
        UPDATE endpoints e SET rate_tokens = b.tokens - b.admitted, rate_tokens_at = now()
          FROM (SELECT t.endpoint_id, t.tokens, c.admitted
                  FROM unnest(v_token_endpoints, v_tokens) AS t(endpoint_id, tokens)
                  JOIN (SELECT a.ep_id, count(*) AS admitted FROM admitted a GROUP BY a.ep_id) c ON c.ep_id = t.endpoint_id) b
         WHERE e.id = b.endpoint_id
    )
    SELECT a.*, skipped FROM admitted a
    UNION ALL
    -- Waiting for a slot of this process: one row per endpoint, without a delivery.
    SELECT DISTINCT false, NULL::uuid, r.tenant_id, NULL::text, NULL::integer, NULL::integer, NULL::timestamptz, NULL::text,
           NULL::timestamptz, NULL::timestamptz, NULL::uuid, NULL::text, NULL::timestamptz, NULL::text, r.endpoint_id,
           NULL::text, NULL::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::text, NULL::bigint, skipped
      FROM ranked r WHERE p_all_local AND NOT r.local;
    IF FOUND THEN
      RETURN;
    END IF;
  END IF;
  -- Nothing admitted: one row without a delivery tells how many endpoints were skipped.
  IF skipped > 0 THEN
    local := NULL;
    id := NULL;
    RETURN NEXT;
  END IF;
END $$;
