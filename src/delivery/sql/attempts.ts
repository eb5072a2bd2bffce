/**
 * claim:  queued → in_flight (or → dead, unsent, when its endpoint was disabled since admission)
 * record: in_flight → succeeded | pending (retry at next_attempt_at) | dead (dead_reason)
 *         + attempt row + endpoint health, and the slot's hand-off: pending → in_flight
 *
 * Inputs and outputs are named on each statement. Every statement here is guarded by the status it
 * expects (and by the attempt number for results), so a late or repeated call changes nothing.
 */
import type { Knex } from 'knex';
import type { DeadLetterReason, Trigger } from '../../domain/delivery-status.js';
import { newId } from '../../domain/ids.js';
import { run, statement } from '../../infra/sql.js';
import { claimedColumns, rowToClaimed, type ClaimedDelivery } from './claimed.js';
import { headOfLine } from './head-of-line.js';

/**
 * Takes a queued delivery for one attempt. Only one worker can win: the row moves queued -> in_flight
 * atomically, with a lease long enough for the attempt, after which the sweeper may take it back.
 * An endpoint disabled or deleted since admission gets nothing sent: the delivery is dead-lettered
 * in the same statement (`status` comes back `dead`), with no attempt counted or logged, as if
 * it had still been waiting when the endpoint was disabled.
 */
const claimStatement = statement(
  'claim_delivery',
  `UPDATE deliveries d
        SET status = CASE WHEN x.live THEN 'in_flight' ELSE 'dead' END,
            attempt_count = d.attempt_count + CASE WHEN x.live THEN 1 ELSE 0 END,
            lease_until = CASE WHEN x.live THEN now() + make_interval(secs => :lease / 1000.0) END,
            next_attempt_at = CASE WHEN x.live THEN d.next_attempt_at END,
            dead_reason = CASE WHEN x.live THEN d.dead_reason WHEN ep.deleted_at IS NULL THEN 'endpoint_disabled' ELSE 'endpoint_deleted' END,
            last_error = CASE WHEN x.live THEN d.last_error
                              WHEN ep.deleted_at IS NULL THEN 'endpoint is disabled' ELSE 'endpoint was deleted' END,
            updated_at = now()
       FROM events ev, endpoints ep, LATERAL (SELECT ep.status = 'active' AND ep.deleted_at IS NULL AS live) x
      WHERE d.id = :id AND d.status = 'queued' AND ev.id = d.event_id AND ep.id = d.endpoint_id
  RETURNING ${claimedColumns}`,
);

export async function claimDelivery(db: Knex, id: string, leaseMs: number): Promise<ClaimedDelivery | undefined> {
  const rows = await run(db, claimStatement, { lease: leaseMs, id });
  return rows[0] ? rowToClaimed(rows[0]) : undefined;
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
    | { status: 'dead'; reason: DeadLetterReason };
  /** Counts toward the circuit breaker and the auto-disable window. */
  endpointFailure: boolean;
  disableEndpoint?: string;
}

export interface HealthLimits {
  circuitFailureThreshold: number;
  circuitCooldownSeconds: number;
}

export interface Recorded {
  /** False when the attempt finished after its lease was taken back: nothing was changed. */
  applied: boolean;
  /** The endpoint's next delivery, already in flight for this worker, when it was handed off. */
  next?: ClaimedDelivery;
}

const recordStatement = statement(
  'record_attempt',
  `WITH done AS (
       UPDATE deliveries SET
         status = :status, next_attempt_at = :nextAt, lease_until = NULL, next_trigger = 'retry',
         dead_reason = :deadReason, last_status_code = :statusCode, last_error = :lastError,
         succeeded_at = CASE WHEN :succeeded THEN COALESCE(succeeded_at, now()) ELSE succeeded_at END,
         updated_at = now()
       WHERE id = :deliveryId AND status = 'in_flight' AND attempt_count = :attemptNumber
       RETURNING id
     ), logged AS (
       INSERT INTO attempts (id, delivery_id, tenant_id, attempt_number, trigger, started_at, duration_ms, status_code,
                             outcome, error_class, error_message, response_excerpt, next_attempt_at)
       SELECT :attemptId, done.id, :tenantId, :attemptNumber, :trigger, :startedAt, :durationMs, :statusCode,
              :outcome, :errorClass, :errorMessage, :responseExcerpt, :nextAt FROM done
     ), health AS (
       UPDATE endpoints e SET
         consecutive_failures = CASE WHEN :failure THEN e.consecutive_failures + 1 ELSE 0 END,
         failing_since = CASE WHEN :failure THEN COALESCE(e.failing_since, now()) ELSE NULL END,
         circuit_open_until = CASE WHEN :failure AND e.consecutive_failures + 1 >= :threshold
                                   THEN now() + make_interval(secs => :cooldown) ELSE NULL END,
         status = CASE WHEN :disable::text IS NOT NULL THEN 'disabled' ELSE e.status END,
         disabled_reason = COALESCE(:disable::text, e.disabled_reason),
         updated_at = CASE WHEN :disable::text IS NOT NULL THEN now() ELSE e.updated_at END
       WHERE e.id = :endpointId AND EXISTS (SELECT 1 FROM done)
         AND (:failure OR e.consecutive_failures <> 0 OR e.circuit_open_until IS NOT NULL OR :disable::text IS NOT NULL)
       RETURNING e.circuit_open_until
     ), handed AS (
       UPDATE deliveries d
          SET status = 'in_flight', attempt_count = d.attempt_count + 1,
              lease_until = now() + make_interval(secs => :lease / 1000.0), updated_at = now()
         FROM events ev, endpoints ep
        WHERE :handOff AND EXISTS (SELECT 1 FROM done) AND :disable::text IS NULL
          -- A failure hands on only while the circuit stays closed, judged by the health update above,
          -- which read the endpoint's latest row under its lock: the failure that opens the circuit
          -- ends the chain, so the open circuit and the half-open single probe stay exact.
          AND (NOT :failure OR EXISTS (SELECT 1 FROM health h WHERE h.circuit_open_until IS NULL))
          AND d.id = (
                SELECT q.delivery_id FROM delivery_queue q
                  JOIN deliveries n ON n.id = q.delivery_id JOIN endpoints e ON e.id = q.endpoint_id
                 WHERE q.endpoint_id = :endpointId AND q.status = 'pending' AND q.next_attempt_at <= now() AND n.status = 'pending'
                   AND e.status = 'active' AND e.deleted_at IS NULL AND e.rate_limit_per_second IS NULL
                   -- A retry keeps its place at the head of its message's line; success or dead releases it.
                   AND ${headOfLine('q', "(CASE WHEN :status = 'pending' THEN '' ELSE :deliveryId END)")}
                 ORDER BY q.next_attempt_at, q.delivery_id
                 LIMIT 1
                 FOR UPDATE OF n SKIP LOCKED)
          AND ev.id = d.event_id AND ep.id = d.endpoint_id
       RETURNING ${claimedColumns}
     )
     SELECT (SELECT count(*) FROM done)::int AS applied, handed.* FROM (SELECT 1) one LEFT JOIN handed ON true`,
);

/**
 * Records one attempt and its consequence in one statement. The guard on status and attempt number
 * makes a late result (from a worker whose lease was taken back) change nothing.
 *
 * With `handOffLeaseMs`, the slot is handed on whatever the outcome: the same statement takes the
 * endpoint's next due delivery straight to in_flight, so the endpoint's busy count never changes
 * and no admission round or Redis job is needed. A failure is as cheap as a success: it does not
 * send its endpoint back through admission, and a retry that has come due rides the same chain as
 * fresh work. Only for an endpoint without a rate limit (the token bucket is admission's), never by
 * the failure that opens the circuit or the 410 that disables the endpoint, and only the head of a
 * message's line where the endpoint orders per message, exactly as admission would choose; a
 * delivery going back to `pending` for a retry still holds its line.
 */
export async function recordAttempt(db: Knex, a: AttemptRecord, limits: HealthLimits, handOffLeaseMs?: number): Promise<Recorded> {
  const next = a.next;
  const lastError = a.errorMessage ?? (a.statusCode && a.outcome !== 'success' ? `HTTP ${a.statusCode}` : null);
  const disable = a.disableEndpoint ?? null;
  const rows = await run(db, recordStatement, {
    status: next.status,
    nextAt: next.status === 'pending' ? next.at : null,
    deadReason: next.status === 'dead' ? next.reason : null,
    statusCode: a.statusCode,
    lastError: next.status === 'succeeded' ? null : lastError,
    succeeded: next.status === 'succeeded',
    deliveryId: a.deliveryId,
    attemptNumber: a.attemptNumber,
    attemptId: newId('attempt'),
    tenantId: a.tenantId,
    trigger: a.trigger,
    startedAt: a.startedAt,
    durationMs: Math.round(a.durationMs),
    outcome: a.outcome,
    errorClass: a.errorClass,
    errorMessage: a.errorMessage,
    responseExcerpt: a.responseExcerpt,
    failure: a.endpointFailure,
    threshold: limits.circuitFailureThreshold,
    cooldown: limits.circuitCooldownSeconds,
    disable,
    endpointId: a.endpointId,
    handOff: handOffLeaseMs !== undefined,
    lease: handOffLeaseMs ?? 0,
  });
  const row = rows[0];
  return { applied: row?.applied === 1, next: row?.id ? rowToClaimed(row) : undefined };
}

/** A success of a healthy endpoint, as the batched record statement takes it. */
export interface SuccessItem {
  record: AttemptRecord;
  /** Take the endpoint's next due delivery for this slot (see `recordAttempt`). */
  handOff: boolean;
}

const successesStatement = statement(
  'record_successes',
  `WITH input AS (
       SELECT * FROM unnest(:deliveryIds::text[], :attemptNumbers::int[], :attemptIds::text[], :tenantIds::text[],
                            :triggers::text[], :startedAts::timestamptz[], :durations::int[], :statusCodes::int[],
                            :excerpts::text[], :endpointIds::text[], :handOffs::boolean[])
              WITH ORDINALITY AS i(delivery_id, attempt_number, attempt_id, tenant_id, trigger, started_at, duration_ms,
                                   status_code, response_excerpt, endpoint_id, hand_off, n)
     ), done AS (
       UPDATE deliveries d SET
         status = 'succeeded', next_attempt_at = NULL, lease_until = NULL, next_trigger = 'retry',
         dead_reason = NULL, last_status_code = i.status_code, last_error = NULL,
         succeeded_at = COALESCE(d.succeeded_at, now()), updated_at = now()
         FROM input i
        WHERE d.id = i.delivery_id AND d.status = 'in_flight' AND d.attempt_count = i.attempt_number
       RETURNING i.n, i.endpoint_id, i.hand_off
     ), logged AS (
       INSERT INTO attempts (id, delivery_id, tenant_id, attempt_number, trigger, started_at, duration_ms, status_code,
                             outcome, response_excerpt)
       SELECT i.attempt_id, i.delivery_id, i.tenant_id, i.attempt_number, i.trigger, i.started_at, i.duration_ms,
              i.status_code, 'success', i.response_excerpt
         FROM input i JOIN done ON done.n = i.n
     ), health AS (
       UPDATE endpoints e SET consecutive_failures = 0, failing_since = NULL, circuit_open_until = NULL
        WHERE e.id IN (SELECT endpoint_id FROM done) AND (e.consecutive_failures <> 0 OR e.circuit_open_until IS NOT NULL)
     ), want AS (
       SELECT endpoint_id, count(*)::int AS k FROM done WHERE hand_off GROUP BY endpoint_id
     ), picked AS (
       SELECT p.id, w.endpoint_id AS slot_endpoint, row_number() OVER (PARTITION BY w.endpoint_id ORDER BY p.next_attempt_at, p.id) AS slot_rank
         FROM want w
         JOIN endpoints e ON e.id = w.endpoint_id
         CROSS JOIN LATERAL (
           SELECT q.delivery_id AS id, q.next_attempt_at FROM delivery_queue q JOIN deliveries n ON n.id = q.delivery_id
            WHERE q.endpoint_id = w.endpoint_id AND q.status = 'pending' AND q.next_attempt_at <= now() AND n.status = 'pending'
              AND ${headOfLine('q', 'ALL(:deliveryIds::text[])')}
            ORDER BY q.next_attempt_at, q.delivery_id
            LIMIT w.k
            FOR UPDATE OF n SKIP LOCKED) p
        -- Success closes the circuit (health above), so only being live and unthrottled matters here.
        WHERE e.status = 'active' AND e.deleted_at IS NULL AND e.rate_limit_per_second IS NULL
     ), handed AS (
       UPDATE deliveries d
          SET status = 'in_flight', attempt_count = d.attempt_count + 1,
              lease_until = now() + make_interval(secs => :lease / 1000.0), updated_at = now()
         FROM picked, events ev, endpoints ep
        WHERE d.id = picked.id AND ev.id = d.event_id AND ep.id = d.endpoint_id
       RETURNING ${claimedColumns}, picked.slot_endpoint, picked.slot_rank
     )
     -- Which items were applied comes in one row, not repeated in every handed row. The commit does
     -- not wait for its WAL flush (see recordSuccesses).
     SELECT CASE WHEN row_number() OVER () = 1 THEN (SELECT coalesce(array_agg(n), '{}') FROM done) END AS applied, handed.*
       FROM (SELECT set_config('synchronous_commit', 'off', true)) one LEFT JOIN handed ON true`,
);

/**
 * Records the successes of several slots in one statement (group commit, see src/infra/batcher.ts),
 * exactly as `recordAttempt` records each: the same guard against late results, the health reset,
 * and the hand-off. An endpoint with k successes in the batch hands on up to k deliveries, each to
 * one of those slots; several slots can never be given the same delivery, because one statement
 * picks them all for the endpoint. Results are in the order of `items`.
 *
 * Its commit does not wait for the WAL flush (`synchronous_commit = off` for this transaction only),
 * because nothing depends on it being durable at once: a success record that a crash of PostgreSQL
 * loses (the last ~600 ms at most, 3 × wal_writer_delay) leaves its delivery in flight, and the lease
 * sends it again, exactly as when a worker dies between the receiver's answer and the record.
 * Delivery is at-least-once either way and receivers dedupe by webhook-id. Waiting for the flush was
 * half of the statement's time (docs/performance.md, "Dispatch, round two"), and a slot waits for
 * the statement before it sends again. Failures, dead letters and everything an operator does keep
 * the synchronous commit: what they announce or audit must not be undone.
 */
export async function recordSuccesses(db: Knex, items: SuccessItem[], handOffLeaseMs: number): Promise<Recorded[]> {
  const rs = items.map((i) => i.record);
  const rows = await run(db, successesStatement, {
    deliveryIds: rs.map((r) => r.deliveryId),
    attemptNumbers: rs.map((r) => r.attemptNumber),
    attemptIds: rs.map(() => newId('attempt')),
    tenantIds: rs.map((r) => r.tenantId),
    triggers: rs.map((r) => r.trigger),
    startedAts: rs.map((r) => r.startedAt),
    durations: rs.map((r) => Math.round(r.durationMs)),
    statusCodes: rs.map((r) => r.statusCode),
    excerpts: rs.map((r) => r.responseExcerpt),
    endpointIds: rs.map((r) => r.endpointId),
    handOffs: items.map((i) => i.handOff),
    lease: handOffLeaseMs,
  });
  const applied = new Set<number>((rows.find((r) => r.applied)?.applied as Array<number | string> | undefined)?.map(Number) ?? []);
  // The handed deliveries of each endpoint, in the order they were picked.
  const handed = new Map<string, ClaimedDelivery[]>();
  for (const row of rows.filter((r) => r.id).sort((a, b) => Number(a.slot_rank) - Number(b.slot_rank))) {
    const list = handed.get(row.slot_endpoint) ?? [];
    list.push(rowToClaimed(row));
    handed.set(row.slot_endpoint, list);
  }
  return items.map((item, i) => {
    if (!applied.has(i + 1)) return { applied: false };
    return { applied: true, next: item.handOff ? handed.get(item.record.endpointId)?.shift() : undefined };
  });
}
