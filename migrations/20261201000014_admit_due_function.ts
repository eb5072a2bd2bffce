import type { Knex } from 'knex';

/**
 * Admission as one function call: `admit_due` (documented in src/delivery/sql/admit.ts, which calls
 * it). One round trip and plans cached per connection, where the same two statements sent from the
 * client cost either planning on every round (simple query) or four round trips (prepared
 * statements in BEGIN … COMMIT), and a round trip costs more than anything else on the live path.
 *
 * PL/pgSQL runs each statement of a VOLATILE function in a fresh snapshot, which admission needs:
 * the second statement counts busy slots in a snapshot taken after the first took the locks.
 * The head-of-line condition is the one in src/delivery/sql/head-of-line.ts, as it reads today.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(admitDueHead + candidatesOverDeliveries + admitDueTail);
}

/** The function's signature and opening, shared with its later versions (migration 20261201000024). */
export const admitDueHead = `
    CREATE FUNCTION admit_due(
      p_threshold integer, p_batch integer, p_queued_lease_seconds integer,
      p_local integer, p_in_flight_lease_ms integer, p_all_local boolean
    ) RETURNS TABLE (
      local boolean, id text, tenant_id text, status text, attempt_count integer, attempt_base integer,
      replayed_at timestamptz, next_trigger text, deadline_at timestamptz, succeeded_at timestamptz,
      event_id text, event_type text, event_created_at timestamptz, body text,
      ep_id text, url text, ep_status text, retry_policy jsonb, secret_enc text, previous_secret_enc text,
      previous_secret_expires_at timestamptz, deleted_at timestamptz, skipped integer
    )
    LANGUAGE plpgsql VOLATILE SET plan_cache_mode = force_generic_plan AS $$
    #variable_conflict use_column
    DECLARE
      v_ids text[];
      v_candidates integer;
    BEGIN
      -- The admitted rows promise nobody anything: lost in a crash of PostgreSQL they are pending
      -- again and admitted again. So the round does not wait for its WAL flush.
      PERFORM set_config('synchronous_commit', 'off', true);

`;

/** Both statements up to the point where the picked deliveries are known, over `deliveries`. */
const candidatesOverDeliveries = `      -- 1. Candidates: endpoints with a pending delivery (a skip scan over deliveries_due, one
      --    index descent per such endpoint), active, circuit not open, earliest pending due. Each
      --    is try-locked; one that another process is admitting is skipped.
      WITH RECURSIVE pend(endpoint_id) AS (
          (SELECT d.endpoint_id FROM deliveries d WHERE d.status = 'pending' ORDER BY d.endpoint_id LIMIT 1)
        UNION ALL
          SELECT (SELECT d.endpoint_id FROM deliveries d
                   WHERE d.status = 'pending' AND d.endpoint_id > pend.endpoint_id
                   ORDER BY d.endpoint_id LIMIT 1)
            FROM pend WHERE pend.endpoint_id IS NOT NULL
      ), cand AS MATERIALIZED (
        SELECT e.id FROM pend JOIN endpoints e ON e.id = pend.endpoint_id
         WHERE e.status = 'active' AND e.deleted_at IS NULL
           AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
           AND (SELECT p.next_attempt_at FROM deliveries p WHERE p.endpoint_id = e.id AND p.status = 'pending'
                 ORDER BY p.next_attempt_at LIMIT 1) <= now()
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
                   (SELECT count(*) FROM deliveries a WHERE a.endpoint_id = e.id AND a.status IN ('queued', 'in_flight'))::int AS busy,
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
                SELECT q.id, row_number() OVER (ORDER BY q.next_attempt_at, q.id) AS endpoint_rank FROM (
                  SELECT d.id, d.next_attempt_at FROM deliveries d
                   WHERE d.endpoint_id = cap.id AND d.status = 'pending' AND d.next_attempt_at <= now()
                     AND (d.order_key IS NULL OR NOT EXISTS (
                           SELECT 1 FROM deliveries o
                            WHERE o.endpoint_id = d.endpoint_id AND o.order_key = d.order_key AND o.id <> d.id
                              AND o.status IN ('pending', 'queued', 'in_flight')
                              AND (o.status <> 'pending'
                                   OR (COALESCE(o.order_hint, -1), o.order_seq, o.id) < (COALESCE(d.order_hint, -1), d.order_seq, d.id))))
                   ORDER BY d.next_attempt_at, d.id
                   LIMIT cap.free
                   FOR UPDATE SKIP LOCKED) q) p
             WHERE cap.free > 0
`;

/** From the picked deliveries on: ranking, the admitting UPDATE, rate tokens, the skipped count. */
export const admitDueTail = `        ), ranked AS (
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
    END $$;
`;

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION admit_due(integer, integer, integer, integer, integer, boolean)');
}
