import type { Knex } from 'knex';
import { admitDueHead, admitDueTail, up as createAdmitDue } from './20261201000014_admit_due_function.js';
import { up as orderAdmissionProbe } from './20261201000023_admission_probe_order.js';

/**
 * The scheduler's indexes move off `deliveries` onto `delivery_queue`, a mirror of the unfinished
 * deliveries only, kept by triggers.
 *
 * Why (docs/performance.md, "Dispatch, round two"): every pick of the next due delivery walked the
 * index entries of every delivery finished since the last vacuum (2.4 ms for 5,000 of them, each
 * pick), because a B-tree entry of a row that left the partial index stays until VACUUM, and
 * `deliveries` is far too large to vacuum every few seconds. And no update of a delivery was HOT,
 * because `status` was in six indexes' predicates: every status change wrote 7 or 4 new index
 * entries into a table that keeps rows for weeks.
 *
 * Now:
 * - `delivery_queue` holds one row per pending, queued or in-flight delivery and nothing else: a
 *   few thousand rows in steady state, so the platform vacuums it about once a second for a few
 *   milliseconds (src/delivery/sql/queue-vacuum.ts) and the walk over finished entries stays short.
 * - Statement-level triggers with transition tables keep it equal to `deliveries` for every writer,
 *   including the SQL functions of intake and publish: one INSERT ... SELECT and one DELETE per
 *   statement, not per row. `deliveries` stays the truth; the mirror is only read to find rows.
 *   A reader locks the `deliveries` row (FOR UPDATE OF d SKIP LOCKED) and checks its status there,
 *   so every lock is taken in one order, deliveries then queue.
 * - `status` is in no index of `deliveries` any more, so a status change is a HOT update when its
 *   page has room (fillfactor 85 leaves it): no index entries at all. Dead letters are found by
 *   `dead_reason IS NOT NULL`, which a constraint ties to `status = 'dead'`.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE TABLE delivery_queue (
      delivery_id text PRIMARY KEY REFERENCES deliveries(id) ON DELETE CASCADE,
      endpoint_id text NOT NULL,
      tenant_id text NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'queued', 'in_flight')),
      next_attempt_at timestamptz,
      lease_until timestamptz,
      deadline_at timestamptz NOT NULL,
      order_key text,
      order_hint bigint,
      order_seq bigint
    ) WITH (fillfactor = 80, vacuum_truncate = false, autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0,
            autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_threshold = 1000, autovacuum_analyze_scale_factor = 0.2);
    CREATE INDEX delivery_queue_due ON delivery_queue (endpoint_id, next_attempt_at, delivery_id) WHERE status = 'pending';
    CREATE INDEX delivery_queue_busy ON delivery_queue (endpoint_id, lease_until) WHERE status IN ('queued', 'in_flight');
    CREATE INDEX delivery_queue_deadline ON delivery_queue (deadline_at) WHERE status = 'pending';
    CREATE INDEX delivery_queue_order ON delivery_queue (endpoint_id, order_key, order_hint, order_seq) WHERE order_key IS NOT NULL;
    CREATE INDEX delivery_queue_tenant ON delivery_queue (tenant_id, delivery_id);

    INSERT INTO delivery_queue (delivery_id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq)
    SELECT id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq
      FROM deliveries WHERE status IN ('pending', 'queued', 'in_flight');

    CREATE FUNCTION delivery_queue_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO delivery_queue (delivery_id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq)
      SELECT n.id, n.endpoint_id, n.tenant_id, n.status, n.next_attempt_at, n.lease_until, n.deadline_at, n.order_key, n.order_hint, n.order_seq
        FROM added n WHERE n.status IN ('pending', 'queued', 'in_flight');
      RETURN NULL;
    END $$;

    CREATE FUNCTION delivery_queue_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      v_finished text[];
    BEGIN
      -- An array, so the delete probes the primary key whatever the planner guesses of \`changed\`.
      SELECT array_agg(n.id) INTO v_finished FROM changed n WHERE n.status NOT IN ('pending', 'queued', 'in_flight');
      IF v_finished IS NOT NULL THEN
        DELETE FROM delivery_queue WHERE delivery_id = ANY(v_finished);
      END IF;
      INSERT INTO delivery_queue AS q (delivery_id, endpoint_id, tenant_id, status, next_attempt_at, lease_until, deadline_at, order_key, order_hint, order_seq)
      SELECT n.id, n.endpoint_id, n.tenant_id, n.status, n.next_attempt_at, n.lease_until, n.deadline_at, n.order_key, n.order_hint, n.order_seq
        FROM changed n WHERE n.status IN ('pending', 'queued', 'in_flight')
      ON CONFLICT (delivery_id) DO UPDATE SET
        status = EXCLUDED.status, next_attempt_at = EXCLUDED.next_attempt_at, lease_until = EXCLUDED.lease_until,
        deadline_at = EXCLUDED.deadline_at, order_key = EXCLUDED.order_key, order_hint = EXCLUDED.order_hint, order_seq = EXCLUDED.order_seq
      WHERE (q.status, q.next_attempt_at, q.lease_until, q.deadline_at, q.order_key, q.order_hint, q.order_seq)
            IS DISTINCT FROM (EXCLUDED.status, EXCLUDED.next_attempt_at, EXCLUDED.lease_until, EXCLUDED.deadline_at,
                              EXCLUDED.order_key, EXCLUDED.order_hint, EXCLUDED.order_seq);
      RETURN NULL;
    END $$;

    CREATE TRIGGER deliveries_queue_added AFTER INSERT ON deliveries
      REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION delivery_queue_added();
    CREATE TRIGGER deliveries_queue_changed AFTER UPDATE ON deliveries
      REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION delivery_queue_changed();

    DROP INDEX deliveries_active, deliveries_due, deliveries_deadline, deliveries_leases, deliveries_order,
               deliveries_unfinished, deliveries_replay, deliveries_dead;
    CREATE INDEX deliveries_replay ON deliveries (replay_id) WHERE replay_id IS NOT NULL;
    CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_reason, id) WHERE dead_reason IS NOT NULL;
    ALTER TABLE deliveries ADD CONSTRAINT deliveries_dead_has_reason CHECK ((status = 'dead') = (dead_reason IS NOT NULL));
    ALTER TABLE deliveries SET (fillfactor = 85);
    DROP FUNCTION admit_due(integer, integer, integer, integer, integer, boolean);
  `);
  await knex.raw(admitDue);
}

/**
 * Admission (documented in src/delivery/sql/admit.ts) over the queue: the same two statements as
 * before, each reading `delivery_queue` where it read the partial indexes of `deliveries`, and
 * locking the `deliveries` rows it admits, whose status it checks again under the lock.
 */
const admitDue = admitDueHead + `      -- 1. Candidates: endpoints with a pending delivery (a skip scan over delivery_queue_due, one
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
` + admitDueTail;

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    DROP FUNCTION admit_due(integer, integer, integer, integer, integer, boolean);
    DROP TRIGGER deliveries_queue_added ON deliveries;
    DROP TRIGGER deliveries_queue_changed ON deliveries;
    DROP FUNCTION delivery_queue_added(), delivery_queue_changed();
    DROP TABLE delivery_queue;
    ALTER TABLE deliveries RESET (fillfactor);
    ALTER TABLE deliveries DROP CONSTRAINT deliveries_dead_has_reason;
    DROP INDEX deliveries_replay, deliveries_dead;
    CREATE INDEX deliveries_active ON deliveries (endpoint_id) WHERE status IN ('queued', 'in_flight');
    CREATE INDEX deliveries_due ON deliveries (endpoint_id, next_attempt_at, id) WHERE status = 'pending';
    CREATE INDEX deliveries_deadline ON deliveries (deadline_at) WHERE status = 'pending';
    CREATE INDEX deliveries_leases ON deliveries (lease_until) WHERE status IN ('queued', 'in_flight');
    CREATE INDEX deliveries_order ON deliveries (endpoint_id, order_key, order_hint, order_seq)
      WHERE order_key IS NOT NULL AND status IN ('pending', 'queued', 'in_flight');
    CREATE INDEX deliveries_unfinished ON deliveries (tenant_id, id) WHERE status IN ('pending', 'queued', 'in_flight');
    CREATE INDEX deliveries_replay ON deliveries (replay_id, status) WHERE replay_id IS NOT NULL;
    CREATE INDEX deliveries_dead ON deliveries (tenant_id, dead_reason, id) WHERE status = 'dead';
  `);
  await createAdmitDue(knex);
  await orderAdmissionProbe(knex);
}
