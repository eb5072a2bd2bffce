/**
 * claim:  queued → in_flight (or, unsent, → pending when its endpoint was paused since admission,
 *         → dead when it was disabled or deleted)
 * record: in_flight → succeeded | pending (retry at next_attempt_at) | dead (dead_reason)
 *         + attempt row + endpoint health, and the slot's hand-off: pending → in_flight
 * egressFailed: in_flight → pending, the attempt given back (the egress proxy failed, not the endpoint)
 *
 * Inputs and outputs are named on each statement. Every statement here is guarded by the status it
 * expects (and, for results, by the claim: claim_held_v2), so a late or repeated call changes nothing.
 */
import type { Knex } from 'knex';
import type { AttemptOutcome, DeadLetterReason, Trigger } from '../../domain/delivery-status.js';
import { lowestStoredId, newId, uuidOf, uuidOfId } from '../../domain/ids.js';
import { run, statement, type WarmUp } from '../../infra/sql.js';
import { rowToClaimed, type ClaimedDelivery } from './claimed.js';

/**
 * Takes a queued delivery for one attempt: queued -> in_flight, or, unsent, -> pending or -> dead
 * when its endpoint was paused, disabled or deleted since admission (db/functions/claim_delivery.sql
 * says what each means, and why the claim is a function: its plan).
 */
const claimStatement = statement('claim_delivery', 'SELECT * FROM claim_delivery(:id::uuid, :eventId::uuid, :lease::int)');

/** The worker's per-attempt statements for a delivery that does not exist and an empty batch (see WarmUp). */
export const warmAttempts: WarmUp = async (run) => {
  await run(claimStatement, { lease: 0, id: lowestStoredId, eventId: lowestStoredId });
  await run(successesStatement, {
    deliveryIds: [], attemptNumbers: [], attemptIds: [], triggers: [], startedAts: [],
    durations: [], statusCodes: [], excerpts: [], endpointIds: [], handOffs: [], threshold: 1, lease: 0, leaseTokens: [],
  });
};

const eventOfDeliveryStatement = statement('event_of_delivery', 'SELECT event_id FROM deliveries WHERE id = :id');

/**
 * `eventId`: the delivery's event (its TypeID), which admission returns with it. A caller without it
 * (a job queued by release 0.6.0 or earlier) costs one more read, to look it up.
 */
export async function claimDelivery(db: Knex, deliveryId: string, leaseMs: number, eventId?: string): Promise<ClaimedDelivery | undefined> {
  // A job naming no delivery's TypeID names no delivery: nothing to claim, as for one that is gone.
  const id = uuidOfId('delivery', deliveryId);
  if (id === null) return undefined;
  const event = eventId === undefined ? (await run<{ event_id: string }>(db, eventOfDeliveryStatement, { id }))[0]?.event_id : uuidOfId('event', eventId);
  if (event === undefined || event === null) return undefined;
  const rows = await run(db, claimStatement, { lease: Math.round(leaseMs), id, eventId: event });
  return rows[0] ? rowToClaimed(rows[0]) : undefined;
}

export interface AttemptRecord {
  deliveryId: string;
  endpointId: string;
  attemptNumber: number;
  /** The token of the claim the attempt was made under (ClaimedDelivery.lease_token). */
  leaseToken: number;
  trigger: Trigger;
  startedAt: Date;
  durationMs: number;
  statusCode: number | null;
  outcome: AttemptOutcome;
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
  /** Why the endpoint is to be disabled (410 Gone): endpoint health does it before this is recorded. */
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

/** The SQL function `record_attempt_v4` (db/functions/record_attempt_v4.sql): one round trip, plans cached. */
const recordStatement = statement(
  'record_attempt',
  `SELECT * FROM record_attempt_v4(:deliveryId, :attemptNumber, :status, :nextAt, :deadReason, :statusCode, :lastError,
                                :attemptId, NULL, :trigger, :startedAt, :durationMs, :outcome, :errorClass,
                                :errorMessage, :responseExcerpt, :endpointId, :failure, :threshold, :cooldown, :handOffLeaseMs,
                                :leaseToken)`,
);

/**
 * Records one attempt and its consequence in one call. The guard on the claim (claim_held_v2) makes
 * a late result (from a worker whose lease was taken back) change nothing.
 *
 * With `handOffLeaseMs`, the slot is handed on whatever the outcome: the endpoint's next due
 * delivery goes straight to in_flight when `next_due` (the rule admission uses too) gives the
 * endpoint room, so no admission round or Redis job is needed.
 */
export async function recordAttempt(db: Knex, a: AttemptRecord, limits: HealthLimits, handOffLeaseMs?: number): Promise<Recorded> {
  const next = a.next;
  const lastError = a.errorMessage ?? (a.statusCode && a.outcome !== 'success' ? `HTTP ${a.statusCode}` : null);
  const rows = await run(db, recordStatement, {
    status: next.status,
    nextAt: next.status === 'pending' ? next.at : null,
    deadReason: next.status === 'dead' ? next.reason : null,
    statusCode: a.statusCode,
    lastError: next.status === 'succeeded' ? null : lastError,
    deliveryId: uuidOf('delivery', a.deliveryId),
    attemptNumber: a.attemptNumber,
    leaseToken: a.leaseToken,
    attemptId: newId('attempt'),
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
    endpointId: uuidOf('endpoint', a.endpointId),
    handOffLeaseMs: handOffLeaseMs === undefined ? null : Math.round(handOffLeaseMs),
  });
  const row = rows[0];
  return { applied: row?.applied === true, next: row?.id ? rowToClaimed(row) : undefined };
}

/** A success of a healthy endpoint, as the batched record statement takes it. */
export interface SuccessItem {
  record: AttemptRecord;
  /** Take the endpoint's next due delivery for this slot (see `recordAttempt`). */
  handOff: boolean;
}

/** The SQL function `record_successes_v4` (db/functions/record_successes_v4.sql). */
const successesStatement = statement(
  'record_successes',
  `SELECT * FROM record_successes_v4(:deliveryIds, :attemptNumbers, :attemptIds, NULL, :triggers, :startedAts,
                                  :durations, :statusCodes, :excerpts, :endpointIds, :handOffs, :threshold, :lease, :leaseTokens)`,
);

/**
 * Records the successes of several slots in one call (group commit, see src/infra/batcher.ts),
 * exactly as `recordAttempt` records each; what it skips and why (the WAL flush) is in the
 * function's header. Results are in the order of `items`.
 */
export async function recordSuccesses(db: Knex, items: SuccessItem[], limits: HealthLimits, handOffLeaseMs: number): Promise<Recorded[]> {
  const rs = items.map((i) => i.record);
  const rows = await run(db, successesStatement, {
    deliveryIds: rs.map((r) => uuidOf('delivery', r.deliveryId)),
    attemptNumbers: rs.map((r) => r.attemptNumber),
    attemptIds: rs.map(() => newId('attempt')),
    triggers: rs.map((r) => r.trigger),
    startedAts: rs.map((r) => r.startedAt),
    durations: rs.map((r) => Math.round(r.durationMs)),
    statusCodes: rs.map((r) => r.statusCode),
    excerpts: rs.map((r) => r.responseExcerpt),
    endpointIds: rs.map((r) => uuidOf('endpoint', r.endpointId)),
    handOffs: items.map((i) => i.handOff),
    threshold: limits.circuitFailureThreshold,
    lease: Math.round(handOffLeaseMs),
    leaseTokens: rs.map((r) => r.leaseToken),
  });
  // The first row says which items were applied; the rest are the handed deliveries.
  const applied = new Set<number>(((rows[0]?.applied ?? []) as Array<number | string>).map(Number));
  const handed = new Map<string, ClaimedDelivery[]>();
  for (const row of rows.slice(1)) {
    const claimed = rowToClaimed(row);
    const list = handed.get(claimed.endpoint.id) ?? [];
    list.push(claimed);
    handed.set(claimed.endpoint.id, list);
  }
  return items.map((item, i) => {
    if (!applied.has(i + 1)) return { applied: false };
    return { applied: true, next: item.handOff ? handed.get(item.record.endpointId)?.shift() : undefined };
  });
}

/**
 * The egress proxy failed before the target was reached: the claim's attempt is given back
 * (attempt_count one less than the claim's, so the next try carries the same `webhook-attempt` and
 * the endpoint's budget is whole), no attempt row is written and endpoint health is not touched.
 * `next_trigger` stays as it was: the try that did not happen keeps its name. Guarded like
 * `record_attempt_v4` (claim_held_v2); the triggers put the queue row back to pending.
 */
const egressFailedStatement = statement(
  'egress_failed',
  `UPDATE deliveries d
      SET status = 'pending', attempt_count = :attemptNumber - 1, lease_until = NULL,
          next_attempt_at = :nextAt, last_error = :lastError, updated_at = now()
     FROM delivery_queue q
    WHERE d.id = :deliveryId AND q.delivery_id = :deliveryId
      AND claim_held_v2(d.status, d.attempt_count, d.lease_until, q.status, q.attempt_count, q.lease_until, :attemptNumber, :leaseToken)
   RETURNING d.id`,
);

export interface EgressFailure {
  deliveryId: string;
  /** The attempt number the claim gave the delivery (its attempt_count while in flight). */
  attemptNumber: number;
  /** The claim's token (ClaimedDelivery.lease_token). */
  leaseToken: number;
  nextAt: Date;
  lastError: string;
}

/** Answers whether the delivery was still in flight on that attempt (false: nothing changed). */
export async function recordEgressFailure(db: Knex, f: EgressFailure): Promise<boolean> {
  const rows = await run(db, egressFailedStatement, {
    deliveryId: uuidOf('delivery', f.deliveryId),
    attemptNumber: f.attemptNumber,
    leaseToken: f.leaseToken,
    nextAt: f.nextAt,
    lastError: f.lastError.slice(0, 300),
  });
  return rows.length > 0;
}
