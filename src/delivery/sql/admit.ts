/**
 * admit: pending → queued (for Redis) or pending → in_flight (for a slot of this process)
 *
 * Inputs:  limits (lease lengths, circuit threshold, per-endpoint batch) and `local`, how many
 *          admitted deliveries this process can start at once without Redis.
 * Outputs: the admitted deliveries; up to `local` of them (spread round-robin over endpoints, at
 *          most half of an endpoint's concurrency unless Redis is failing) are already `in_flight`
 *          with their attempt counted and come with everything an attempt needs (`ClaimedDelivery`);
 *          the rest are `queued` and need a BullMQ job each (none while Redis is failing).
 *          `skipped`: endpoints another process was admitting at that moment.
 *
 * Cost follows endpoints with pending work, not endpoints that exist: candidates come from a skip
 * scan over `deliveries_due` (one index descent per endpoint that has a pending delivery), so
 * 100,000 endpoints with nothing pending cost nothing.
 *
 * No platform-wide lock. Each endpoint is admitted under its own transaction-scoped advisory lock,
 * taken with `pg_try_advisory_xact_lock`: two processes admit different endpoints in parallel, and
 * an endpoint that another process is admitting right now is skipped (the caller runs another round
 * shortly, so what that process's snapshot could not see yet is not left waiting for a timer).
 * Capacity is then counted by a second statement whose snapshot is taken after the locks are held,
 * so it sees everything the previous admitter of each endpoint committed: `maxConcurrency`, rate
 * tokens and the half-open circuit's single probe stay exact across processes. Nothing else raises
 * an endpoint's busy count (a claim keeps it, a slot hand-off swaps one busy delivery for another,
 * a result lowers it), so admission is the only place that needs the lock.
 *
 * One round trip: three statements of one implicit transaction (simple query protocol). The locked
 * endpoint ids travel from the first to the second statement in a transaction-local setting.
 */
import type { Knex } from 'knex';
import { runScript } from '../../infra/sql.js';
import { claimedColumns, rowToClaimed, type ClaimedDelivery } from './claimed.js';
import { headOfLine } from './head-of-line.js';

export interface AdmissionLimits {
  /** Lease on `queued`: how long Redis may hold a job before the sweeper assumes it was lost. */
  queuedLeaseSeconds: number;
  circuitFailureThreshold: number;
  /** Upper bound of deliveries one endpoint gets per admission round, for fairness between endpoints. */
  perEndpointBatch: number;
}

export interface LocalClaims {
  /** How many admitted deliveries may go straight to `in_flight` for this process's own slots. */
  count: number;
  /** Lease of such an in-flight attempt, as a claim would give it. */
  inFlightLeaseMs: number;
  /**
   * `share` (Redis is up): an endpoint's work goes to local slots only up to half its concurrency,
   * the rest to Redis, so other worker processes take part in a backlog. `all` (Redis is failing):
   * everything runs locally and nothing is queued.
   */
  mode?: 'share' | 'all';
}

export interface AdmittedDelivery {
  id: string;
  endpoint_id: string;
  attempt_count: number;
}

export interface AdmissionRound {
  /** Queued for Redis: one BullMQ job each. */
  queued: AdmittedDelivery[];
  /** Already in flight for this process. */
  claimed: ClaimedDelivery[];
  /** Endpoints with due work that another process was admitting; worth another round soon. */
  skipped: number;
}

/** Namespace of the per-endpoint admission locks (the two-key advisory lock space). */
const admissionLockSpace = 727_002;

function sqlInteger(name: string, value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`admission: ${name} must be a non-negative integer, got ${value}`);
  return String(value);
}

/** Endpoints that may have admissible work now: active, circuit not open, earliest pending delivery due. */
export const candidatesSql = `
  WITH RECURSIVE pend(endpoint_id) AS (
      (SELECT endpoint_id FROM deliveries WHERE status = 'pending' ORDER BY endpoint_id LIMIT 1)
    UNION ALL
      SELECT (SELECT d.endpoint_id FROM deliveries d
               WHERE d.status = 'pending' AND d.endpoint_id > pend.endpoint_id
               ORDER BY d.endpoint_id LIMIT 1)
        FROM pend WHERE pend.endpoint_id IS NOT NULL
  )
  SELECT e.id FROM pend JOIN endpoints e ON e.id = pend.endpoint_id
   WHERE e.status = 'active' AND e.deleted_at IS NULL
     AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
     -- Written so that only deliveries_due can answer it (as EXISTS the planner served it from
     -- (event_id, endpoint_id) whenever statistics were stale, scanning every delivered row).
     AND (SELECT p.next_attempt_at FROM deliveries p WHERE p.endpoint_id = e.id AND p.status = 'pending'
           ORDER BY p.next_attempt_at LIMIT 1) <= now()`;

/**
 * Moves due `pending` deliveries on, per endpoint no more than it has room for: free concurrency
 * slots, rate-limit tokens, and a single probe while its circuit is half-open. Endpoints with an
 * open circuit or no room get nothing and cost nothing in Redis: their work waits here.
 */
export async function admitDue(db: Knex, limits: AdmissionLimits, local: LocalClaims = { count: 0, inFlightLeaseMs: 0 }): Promise<AdmissionRound> {
  const threshold = sqlInteger('circuitFailureThreshold', limits.circuitFailureThreshold);
  const batch = sqlInteger('perEndpointBatch', limits.perEndpointBatch);
  const queuedLease = sqlInteger('queuedLeaseSeconds', limits.queuedLeaseSeconds);
  const localCount = sqlInteger('local.count', local.count);
  const inFlightLease = sqlInteger('local.inFlightLeaseMs', Math.round(local.inFlightLeaseMs));
  const allLocal = local.mode === 'all' ? 'true' : 'false';
  const results = await runScript(
    db,
    `WITH cand AS MATERIALIZED (${candidatesSql}),
          locked AS MATERIALIZED (
            SELECT id FROM cand WHERE pg_try_advisory_xact_lock(${admissionLockSpace}, hashtext(id)))
     SELECT set_config('whr.admitting', COALESCE((SELECT string_agg(id, ',') FROM locked), ''), true) AS ids,
            (SELECT count(*) FROM cand)::int - (SELECT count(*) FROM locked)::int AS skipped;

     WITH cand AS (
         SELECT e.id, e.max_concurrency, e.consecutive_failures,
                (SELECT count(*) FROM deliveries a WHERE a.endpoint_id = e.id AND a.status IN ('queued', 'in_flight'))::int AS busy,
                CASE WHEN e.rate_limit_per_second IS NULL THEN NULL
                     ELSE LEAST(e.rate_limit_per_second::float8,
                                COALESCE(e.rate_tokens, e.rate_limit_per_second)
                                + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())))
                END AS tokens
           FROM endpoints e
          WHERE e.id = ANY(string_to_array(NULLIF(current_setting('whr.admitting'), ''), ','))
            -- Checked again in this snapshot: the circuit may have opened since the candidates were read.
            AND e.status = 'active' AND e.deleted_at IS NULL
            AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
       ), cap AS (
         SELECT id, busy, max_concurrency, tokens, GREATEST(0, LEAST(
                  max_concurrency - busy,
                  CASE WHEN consecutive_failures >= ${threshold} THEN 1 - busy ELSE ${batch} END,
                  COALESCE(floor(tokens)::int, ${batch}),
                  ${batch})) AS free
           FROM cand
       ), picked AS (
         SELECT p.id, p.endpoint_rank,
                ${allLocal} OR p.endpoint_rank <= ceil(cap.max_concurrency / 2.0) - cap.busy AS local_ok
           FROM cap CROSS JOIN LATERAL (
           SELECT d.id, row_number() OVER (ORDER BY d.next_attempt_at, d.id) AS endpoint_rank FROM (
             SELECT d.id, d.next_attempt_at FROM deliveries d
              WHERE d.endpoint_id = cap.id AND d.status = 'pending' AND d.next_attempt_at <= now()
                AND ${headOfLine('d')}
              ORDER BY d.next_attempt_at, d.id
              LIMIT cap.free
              FOR UPDATE SKIP LOCKED) d) p
          WHERE cap.free > 0
       ), ranked AS (
         -- This process's free slots go round-robin over endpoints: each endpoint's first, then seconds...
         SELECT id, local FROM (
           SELECT id, local_ok AND row_number() OVER (PARTITION BY local_ok ORDER BY endpoint_rank, id) <= ${localCount} AS local
             FROM picked) x
          WHERE local OR NOT ${allLocal}
       ), admitted AS (
         UPDATE deliveries d SET
                status = CASE WHEN r.local THEN 'in_flight' ELSE 'queued' END,
                attempt_count = d.attempt_count + CASE WHEN r.local THEN 1 ELSE 0 END,
                lease_until = now() + CASE WHEN r.local THEN make_interval(secs => ${inFlightLease} / 1000.0)
                                           ELSE make_interval(secs => ${queuedLease}) END,
                updated_at = now()
           FROM ranked r, events ev, endpoints ep
          WHERE d.id = r.id AND ev.id = d.event_id AND ep.id = d.endpoint_id
         RETURNING r.local, ${claimedColumns.replace('ev.body', 'CASE WHEN r.local THEN ev.body END AS body')}
       ), spent AS (
         UPDATE endpoints e SET rate_tokens = cap.tokens - n.count, rate_tokens_at = now()
           FROM cap, (SELECT ep_id AS endpoint_id, count(*) AS count FROM admitted GROUP BY ep_id) n
          WHERE e.id = cap.id AND n.endpoint_id = cap.id AND cap.tokens IS NOT NULL
       )
       SELECT * FROM admitted`,
  );
  const head = results[0]?.[0] as { skipped: number } | undefined;
  const rows = results[1] ?? [];
  return {
    queued: rows.filter((r) => !r.local).map((r) => ({ id: r.id, endpoint_id: r.ep_id, attempt_count: r.attempt_count })),
    claimed: rows.filter((r) => r.local).map(rowToClaimed),
    skipped: head?.skipped ?? 0,
  };
}
