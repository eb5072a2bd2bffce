import type { Knex } from 'knex';
import { headOfLine } from './order-sql.js';
import { newId } from '../domain/ids.js';
import type { EndpointRow } from './endpoints-store.js';

export type Trigger = 'initial' | 'retry' | 'replay';

export interface ClaimedDelivery {
  id: string;
  tenant_id: string;
  attempt_count: number;
  /** Attempts made before the last replay; a replay gets a fresh attempt budget. */
  attempt_base: number;
  replayed_at: Date | null;
  next_trigger: Trigger;
  deadline_at: Date;
  succeeded_at: Date | null;
  event_id: string;
  event_type: string;
  event_created_at: Date;
  body: string;
  endpoint: Pick<EndpointRow, 'id' | 'url' | 'status' | 'retry_policy' | 'secret_enc' | 'previous_secret_enc' | 'previous_secret_expires_at' | 'deleted_at'>;
}

/**
 * Takes a queued delivery for one attempt. Only one worker can win: the row moves queued -> in_flight
 * atomically, with a lease long enough for the attempt, after which the sweeper may take it back.
 */
const claimedColumns = `d.id, d.tenant_id, d.attempt_count, d.attempt_base, d.replayed_at, d.next_trigger, d.deadline_at, d.succeeded_at,
            ev.id AS event_id, ev.type AS event_type, ev.created_at AS event_created_at, ev.body,
            ep.id AS ep_id, ep.url, ep.status AS ep_status, ep.retry_policy, ep.secret_enc, ep.previous_secret_enc,
            ep.previous_secret_expires_at, ep.deleted_at`;

export async function claimDelivery(db: Knex, id: string, leaseMs: number): Promise<ClaimedDelivery | undefined> {
  const { rows } = await db.raw(
    `UPDATE deliveries d
        SET status = 'in_flight', attempt_count = d.attempt_count + 1,
            lease_until = now() + make_interval(secs => ? / 1000.0), updated_at = now()
       FROM events ev, endpoints ep
      WHERE d.id = ? AND d.status = 'queued' AND ev.id = d.event_id AND ep.id = d.endpoint_id
  RETURNING ${claimedColumns}`,
    [leaseMs, id],
  );
  return rows[0] ? rowToClaimed(rows[0]) : undefined;
}

/**
 * Slot hand-off: after a success, the worker that holds one of an endpoint's slots takes the
 * endpoint's next due delivery straight to in_flight, in the transaction that records the success,
 * so the endpoint's busy count never changes and no admission round or Redis job is needed. Only
 * for a healthy endpoint without a rate limit (the token bucket is admission's), and only the head
 * of a message's line where the endpoint orders per message, exactly as admission would choose.
 */
export async function handOffNext(trx: Knex.Transaction, endpointId: string, leaseMs: number): Promise<ClaimedDelivery | undefined> {
  const { rows } = await trx.raw(
    `UPDATE deliveries d
        SET status = 'in_flight', attempt_count = d.attempt_count + 1,
            lease_until = now() + make_interval(secs => :lease / 1000.0), updated_at = now()
       FROM events ev, endpoints ep
      WHERE d.id = (
              SELECT n.id FROM deliveries n JOIN endpoints e ON e.id = n.endpoint_id
               WHERE n.endpoint_id = :endpointId AND n.status = 'pending' AND n.next_attempt_at <= now()
                 AND e.status = 'active' AND e.deleted_at IS NULL AND e.rate_limit_per_second IS NULL
                 AND e.consecutive_failures = 0 AND e.circuit_open_until IS NULL
                 AND ${headOfLine('n')}
               ORDER BY n.next_attempt_at, n.id
               LIMIT 1
               FOR UPDATE OF n SKIP LOCKED)
        AND ev.id = d.event_id AND ep.id = d.endpoint_id
  RETURNING ${claimedColumns}`,
    { lease: leaseMs, endpointId },
  );
  return rows[0] ? rowToClaimed(rows[0]) : undefined;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
function rowToClaimed(r: any): ClaimedDelivery {
  return {
    id: r.id,
    tenant_id: r.tenant_id,
    attempt_count: r.attempt_count,
    attempt_base: r.attempt_base,
    replayed_at: r.replayed_at,
    next_trigger: r.next_trigger,
    deadline_at: r.deadline_at,
    succeeded_at: r.succeeded_at,
    event_id: r.event_id,
    event_type: r.event_type,
    event_created_at: r.event_created_at,
    body: r.body,
    endpoint: {
      id: r.ep_id,
      url: r.url,
      status: r.ep_status,
      retry_policy: r.retry_policy,
      secret_enc: r.secret_enc,
      previous_secret_enc: r.previous_secret_enc,
      previous_secret_expires_at: r.previous_secret_expires_at,
      deleted_at: r.deleted_at,
    },
  };
}

export interface AttemptRecord {
  deliveryId: string;
  tenantId: string;
  endpointId: string;
  attemptNumber: number;
  trigger: Trigger;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  outcome: 'success' | 'retry' | 'terminal';
  errorClass: string | null;
  errorMessage: string | null;
  responseExcerpt: string | null;
  /** What becomes of the delivery. */
  next:
    | { status: 'succeeded' }
    | { status: 'pending'; at: Date }
    | { status: 'dead'; reason: 'max_attempts' | 'max_age' | 'terminal' | 'endpoint_disabled' };
  /** Counts toward the circuit breaker and the auto-disable window. */
  endpointFailure: boolean;
  disableEndpoint?: string;
}

export interface HealthLimits {
  circuitFailureThreshold: number;
  circuitCooldownSeconds: number;
}

/**
 * Records one attempt and its consequence in one statement. The guard on status and attempt number
 * makes a late result (from a worker whose lease was taken back) change nothing.
 */
export async function recordAttempt(db: Knex, a: AttemptRecord, limits: HealthLimits): Promise<boolean> {
  const next = a.next;
  const lastError = a.errorMessage ?? (a.statusCode && a.outcome !== 'success' ? `HTTP ${a.statusCode}` : null);
  const { rows } = await db.raw(
    `WITH d AS (
       UPDATE deliveries SET
         status = ?, next_attempt_at = ?, lease_until = NULL, next_trigger = 'retry',
         dead_reason = ?, last_status_code = ?, last_error = ?,
         succeeded_at = CASE WHEN ? THEN COALESCE(succeeded_at, now()) ELSE succeeded_at END,
         updated_at = now()
       WHERE id = ? AND status = 'in_flight' AND attempt_count = ?
       RETURNING id
     ), a AS (
       INSERT INTO attempts (id, delivery_id, tenant_id, attempt_number, trigger, started_at, duration_ms, status_code,
                             outcome, error_class, error_message, response_excerpt, next_attempt_at)
       SELECT ?, d.id, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM d
     ), health AS (
       UPDATE endpoints e SET
         consecutive_failures = CASE WHEN ? THEN e.consecutive_failures + 1 ELSE 0 END,
         failing_since = CASE WHEN ? THEN COALESCE(e.failing_since, now()) ELSE NULL END,
         circuit_open_until = CASE WHEN ? AND e.consecutive_failures + 1 >= ? THEN now() + make_interval(secs => ?) ELSE NULL END,
         status = CASE WHEN ?::text IS NOT NULL THEN 'disabled' ELSE e.status END,
         disabled_reason = COALESCE(?::text, e.disabled_reason),
         updated_at = CASE WHEN ?::text IS NOT NULL THEN now() ELSE e.updated_at END
       WHERE e.id = ? AND EXISTS (SELECT 1 FROM d)
         AND (? OR e.consecutive_failures <> 0 OR e.circuit_open_until IS NOT NULL OR ?::text IS NOT NULL)
     )
     SELECT count(*)::int AS n FROM d`,
    [
      next.status, next.status === 'pending' ? next.at : null,
      next.status === 'dead' ? next.reason : null, a.statusCode, next.status === 'succeeded' ? null : lastError,
      next.status === 'succeeded',
      a.deliveryId, a.attemptNumber,
      newId('attempt'), a.tenantId, a.attemptNumber, a.trigger, a.startedAt, Math.round(a.durationMs), a.statusCode,
      a.outcome, a.errorClass, a.errorMessage, a.responseExcerpt, next.status === 'pending' ? next.at : null,
      a.endpointFailure, a.endpointFailure, a.endpointFailure, limits.circuitFailureThreshold, limits.circuitCooldownSeconds,
      a.disableEndpoint ?? null, a.disableEndpoint ?? null, a.disableEndpoint ?? null,
      a.endpointId,
      a.endpointFailure, a.disableEndpoint ?? null,
    ],
  );
  return rows[0]?.n === 1;
}
