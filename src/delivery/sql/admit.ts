import type { Knex } from 'knex';
import { runScript } from '../infra/sql.js';
import { headOfLine } from './order-sql.js';

export interface AdmissionLimits {
  /** Lease on `queued`: how long Redis may hold a job before the sweeper assumes it was lost. */
  queuedLeaseSeconds: number;
  circuitFailureThreshold: number;
  /** Upper bound of deliveries one endpoint gets per admission round, for fairness between endpoints. */
  perEndpointBatch: number;
}

export interface AdmittedDelivery {
  id: string;
  endpoint_id: string;
  attempt_count: number;
}

/** One key for the whole platform: admission decisions are serialised so capacity counts stay exact. */
const admissionLockKey = 727_001;

function sqlInteger(name: string, value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`admission: ${name} must be a non-negative integer, got ${value}`);
  return String(value);
}

/**
 * Moves due `pending` deliveries to `queued`, per endpoint no more than it has room for: free
 * concurrency slots, rate-limit tokens, and a single probe while its circuit is half-open. Endpoints
 * with an open circuit or no room get nothing and cost nothing in Redis: their work waits here.
 *
 * One round trip, two statements in one transaction: the first waits for the platform-wide
 * advisory lock, the second admits. The order matters: the admission statement's snapshot is
 * taken after the lock is held, so it sees everything the previous admitter committed (a single
 * statement that took the lock itself would count busy slots from a snapshot older than the lock).
 * The lock is released when the transaction ends, right after the admission.
 */
export async function admitDue(db: Knex, limits: AdmissionLimits): Promise<AdmittedDelivery[]> {
  const threshold = sqlInteger('circuitFailureThreshold', limits.circuitFailureThreshold);
  const batch = sqlInteger('perEndpointBatch', limits.perEndpointBatch);
  const lease = sqlInteger('queuedLeaseSeconds', limits.queuedLeaseSeconds);
  const results = await runScript(
    db,
    `SELECT pg_advisory_xact_lock(${admissionLockKey});
     WITH cand AS (
         SELECT e.id, e.max_concurrency, e.rate_limit_per_second AS rate, e.consecutive_failures,
                (SELECT count(*) FROM deliveries a WHERE a.endpoint_id = e.id AND a.status IN ('queued', 'in_flight'))::int AS busy,
                CASE WHEN e.rate_limit_per_second IS NULL THEN NULL
                     ELSE LEAST(e.rate_limit_per_second::float8,
                                COALESCE(e.rate_tokens, e.rate_limit_per_second)
                                + e.rate_limit_per_second * EXTRACT(epoch FROM now() - COALESCE(e.rate_tokens_at, now())))
                END AS tokens
           FROM endpoints e
          WHERE e.status = 'active' AND e.deleted_at IS NULL
            AND (e.circuit_open_until IS NULL OR e.circuit_open_until <= now())
            -- Written so that only deliveries_due can answer it: as EXISTS, the planner served it from
            -- (event_id, endpoint_id) whenever statistics were stale, scanning every delivered row.
            AND (SELECT p.next_attempt_at FROM deliveries p WHERE p.endpoint_id = e.id AND p.status = 'pending'
                  ORDER BY p.next_attempt_at LIMIT 1) <= now()
       ), cap AS (
         SELECT id, tokens, GREATEST(0, LEAST(
                  max_concurrency - busy,
                  CASE WHEN consecutive_failures >= ${threshold} THEN 1 - busy ELSE ${batch} END,
                  COALESCE(floor(tokens)::int, ${batch}),
                  ${batch})) AS free
           FROM cand
       ), picked AS (
         SELECT p.id FROM cap CROSS JOIN LATERAL (
           SELECT d.id FROM deliveries d
            WHERE d.endpoint_id = cap.id AND d.status = 'pending' AND d.next_attempt_at <= now()
              AND ${headOfLine('d')}
            ORDER BY d.next_attempt_at, d.id
            LIMIT cap.free
            FOR UPDATE SKIP LOCKED) p
          WHERE cap.free > 0
       ), admitted AS (
         UPDATE deliveries d SET status = 'queued', lease_until = now() + make_interval(secs => ${lease}), updated_at = now()
           FROM picked WHERE d.id = picked.id
         RETURNING d.id, d.endpoint_id, d.attempt_count
       ), spent AS (
         UPDATE endpoints e SET rate_tokens = cap.tokens - n.count, rate_tokens_at = now()
           FROM cap, (SELECT endpoint_id, count(*) AS count FROM admitted GROUP BY endpoint_id) n
          WHERE e.id = cap.id AND n.endpoint_id = cap.id AND cap.tokens IS NOT NULL
       )
       SELECT id, endpoint_id, attempt_count FROM admitted`,
  );
  return results[1] as AdmittedDelivery[];
}
