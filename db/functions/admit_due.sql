-- admit_due: one admission round. pending → queued (for Redis) or pending → in_flight (for a
-- slot of the calling process). Called by src/delivery/sql/admit.ts, which documents the round.
--
-- Inputs:  p_threshold            consecutive failures from which an endpoint's circuit is half-open
--                                 (one probe at a time)
--          p_batch                most deliveries one endpoint gets per round (fairness)
--          p_queued_lease_seconds lease of a queued delivery: how long Redis may hold its job
--          p_local                how many admitted deliveries the caller can start itself now
--          p_in_flight_lease_ms   lease of such an in-flight attempt, as a claim would give it
--          p_all_local            true while Redis is failing: everything runs locally, nothing queued
-- Outputs: one row per admitted delivery: local (already in_flight for the caller, attempt counted,
--          with the event's body and everything an attempt needs) or not (queued: one BullMQ job
--          each). Every row carries skipped, the endpoints another process was admitting; when
--          nothing was admitted but some were skipped, one row with NULL id says only that.
-- Effects: deliveries: status, attempt_count, lease_until, updated_at of the admitted rows;
--          endpoints: rate_tokens, rate_tokens_at of rate-limited endpoints that got work.
--          synchronous_commit off for the calling transaction: admitted rows promise nobody
--          anything, and lost in a crash of PostgreSQL they are simply pending again.
-- Locks:   pg_try_advisory_xact_lock(727002, hashtext(endpoint_id)) per candidate endpoint (one
--          another process holds is skipped, never waited for); then FOR UPDATE OF deliveries
--          SKIP LOCKED on the rows it admits (deliveries before delivery_queue, as every reader).
--
-- Two statements, each in its own snapshot (the function is VOLATILE): the first finds candidates
-- by a skip scan over delivery_queue_due (one index descent per endpoint with pending work) and
-- try-locks them; the second counts busy slots, rate tokens and the circuit in a snapshot taken
-- after the locks are held, so maxConcurrency and the half-open probe stay exact across processes.
-- The head-of-line condition is headOfLine in src/delivery/sql/head-of-line.ts, written out here.
-- Generic plans (plan_cache_mode): one plan per connection, planned once.
CREATE OR REPLACE FUNCTION admit_due(
  p_threshold integer,
  p_batch integer,
  p_queued_lease_seconds integer,
  p_local integer,
  p_in_flight_lease_ms integer,
  p_all_local boolean
)
RETURNS TABLE (
  local boolean,
  id text,
  tenant_id text,
  status text,
  attempt_count integer,
  attempt_base integer,
  replayed_at timestamp with time zone,
  next_trigger text,
  deadline_at timestamp with time zone,
  succeeded_at timestamp with time zone,
  event_id text,
  event_type text,
  event_created_at timestamp with time zone,
  body text,
  ep_id text,
  url text,
  ep_status text,
  retry_policy jsonb,
  secret_enc text,
  previous_secret_enc text,
  previous_secret_expires_at timestamp with time zone,
  deleted_at timestamp with time zone,
  skipped integer
)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $function$
#variable_conflict use_column
DECLARE
  v_ids text[];
  v_candidates integer;
BEGIN
  -- The admitted rows promise nobody anything: lost in a crash of PostgreSQL they are pending
  -- again and admitted again. So the round does not wait for its WAL flush.
  PERFORM set_config('synchronous_commit', 'off', true);

  -- 1. Candidates: endpoints with a pending delivery (a skip scan over delivery_queue_due, one
  --    index descent per such endpoint), active, circuit not open, earliest pending due. Each
  --    is try-locked; one that another process is admitting is skipped.
  WITH RECURSIVE pend(endpoint_id) AS (
      (SELECT q.endpoint_id FROM delivery_queue q WHERE q.status = 'pending'
        ORDER BY q.endpoint_id, q.next_attempt_at, q.delivery_id LIMIT 1)
    UNION ALL
      SELECT (SELECT q.endpoint_id FROM delivery_queue q
               WHERE q.status = 'pending' AND q.endpoint_id > pend.endpoint_id
               ORDER BY q.endpoint_id, q.next_attempt_at, q.delivery_id LIMIT 1)
        FROM pend WHERE pend.endpoint_id IS NOT NULL
  ), cand AS MATERIALIZED (
    SELECT e.id FROM pend JOIN endpoints e ON e.id = pend.endpoint_id
     WHERE e.status = 'active' AND e.deleted_at IS NULL
       AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
       AND (SELECT q.next_attempt_at FROM delivery_queue q WHERE q.endpoint_id = e.id AND q.status = 'pending'
             ORDER BY q.next_attempt_at, q.delivery_id LIMIT 1) <= now()
  ), locked AS MATERIALIZED (
    SELECT c.id FROM cand c WHERE pg_try_advisory_xact_lock(727002, hashtext(c.id))
  )
  SELECT COALESCE((SELECT array_agg(l.id) FROM locked l), '{}'), (SELECT count(*) FROM cand)
    INTO v_ids, v_candidates;
  skipped := v_candidates - cardinality(v_ids);

  -- 2. In a snapshot taken after the locks are held: per endpoint, what it has room for.
  IF cardinality(v_ids) > 0 THEN
    RETURN QUERY
    WITH cand AS (
        SELECT e.id, e.max_concurrency, e.consecutive_failures,
               (SELECT count(*) FROM delivery_queue a WHERE a.endpoint_id = e.id AND a.status IN ('queued', 'in_flight'))::int AS busy,
               CASE WHEN e.rate_limit_per_second IS NULL THEN NULL
                    ELSE LEAST(e.rate_limit_per_second::float8,
                               COALESCE(e.rate_tokens, e.rate_limit_per_second)
                               + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())))
               END AS tokens
          FROM endpoints e
         WHERE e.id = ANY(v_ids)
           -- Checked again in this snapshot: the circuit may have opened since the candidates were read.
           AND e.status = 'active' AND e.deleted_at IS NULL
           AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
    ), cap AS (
        SELECT c.id, c.busy, c.max_concurrency, c.tokens, GREATEST(0, LEAST(
                 c.max_concurrency - c.busy,
                 CASE WHEN c.consecutive_failures >= p_threshold THEN 1 - c.busy ELSE p_batch END,
                 COALESCE(floor(c.tokens)::int, p_batch),
                 p_batch)) AS free
          FROM cand c
    ), picked AS (
        -- Local slots: up to half an endpoint's concurrency, unless everything must run locally.
        SELECT p.id, p.endpoint_rank,
               p_all_local OR p.endpoint_rank <= ceil(cap.max_concurrency / 2.0) - cap.busy AS local_ok
          FROM cap CROSS JOIN LATERAL (
            SELECT x.id, row_number() OVER (ORDER BY x.next_attempt_at, x.id) AS endpoint_rank FROM (
              SELECT q.delivery_id AS id, q.next_attempt_at FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
               WHERE q.endpoint_id = cap.id AND q.status = 'pending' AND q.next_attempt_at <= now()
                 AND d.status = 'pending'
                 AND (q.order_key IS NULL OR NOT EXISTS (
                       SELECT 1 FROM delivery_queue o
                        WHERE o.endpoint_id = q.endpoint_id AND o.order_key = q.order_key AND o.delivery_id <> q.delivery_id
                          AND (o.status <> 'pending'
                               OR (COALESCE(o.order_hint, -1), o.order_seq, o.delivery_id) < (COALESCE(q.order_hint, -1), q.order_seq, q.delivery_id))))
               ORDER BY q.next_attempt_at, q.delivery_id
               LIMIT cap.free
               FOR UPDATE OF d SKIP LOCKED) x) p
         WHERE cap.free > 0
    ), ranked AS (
        -- This process's free slots go round-robin over endpoints: each endpoint's first, then seconds...
        SELECT x.id, x.local FROM (
          SELECT pk.id, pk.local_ok AND row_number() OVER (PARTITION BY pk.local_ok ORDER BY pk.endpoint_rank, pk.id) <= p_local AS local
            FROM picked pk) x
         WHERE x.local OR NOT p_all_local
    ), admitted AS (
        UPDATE deliveries d SET
               status = CASE WHEN r.local THEN 'in_flight' ELSE 'queued' END,
               attempt_count = d.attempt_count + CASE WHEN r.local THEN 1 ELSE 0 END,
               lease_until = now() + CASE WHEN r.local THEN make_interval(secs => p_in_flight_lease_ms / 1000.0)
                                          ELSE make_interval(secs => p_queued_lease_seconds) END,
               updated_at = now()
          FROM ranked r, events ev, endpoints ep
         WHERE d.id = r.id AND ev.id = d.event_id AND ep.id = d.endpoint_id
        RETURNING r.local, d.id, d.tenant_id, d.status, d.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger,
                  d.deadline_at, d.succeeded_at, ev.id AS event_id, ev.type AS event_type, ev.created_at AS event_created_at,
                  CASE WHEN r.local THEN ev.body END AS body, ep.id AS ep_id, ep.url, ep.status AS ep_status, ep.retry_policy,
                  ep.secret_enc, ep.previous_secret_enc, ep.previous_secret_expires_at, ep.deleted_at
    ), spent AS (
        UPDATE endpoints e SET rate_tokens = cap.tokens - n.count, rate_tokens_at = now()
          FROM cap, (SELECT a.ep_id AS endpoint_id, count(*) AS count FROM admitted a GROUP BY a.ep_id) n
         WHERE e.id = cap.id AND n.endpoint_id = cap.id AND cap.tokens IS NOT NULL
    )
    SELECT a.*, skipped FROM admitted a;
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
END
$function$;
