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
import type pg from 'pg';
import type { AttemptOutcome, DeadLetterReason, Trigger } from '../../domain/delivery-status.js';
import { lowestStoredId, newStoredId, uuidOf, uuidOfId } from '../../domain/ids.js';
import { run, statement, type WarmUp } from '../../infra/sql.js';
import { publishWarmUpEvents } from '../../store/events-store.js';
import { admitStatement } from './admit.js';
import { rowToClaimed, type ClaimedDelivery } from './claimed.js';

/**
 * Takes a queued delivery for one attempt: queued -> in_flight, or, unsent, -> pending or -> dead
 * when its endpoint was paused, disabled or deleted since admission (db/functions/claim_delivery.sql
 * says what each means, and why the claim is a function: its plan).
 */
const claimStatement = statement('claim_delivery', 'SELECT * FROM claim_delivery(:id::uuid, :eventId::uuid, :lease::int)');

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
  const row = (await run(db, recordStatement, recordParams(a, limits, handOffLeaseMs)))[0];
  return { applied: row?.applied === true, next: row?.id ? rowToClaimed(row) : undefined };
}

function recordParams(a: AttemptRecord, limits: HealthLimits, handOffLeaseMs: number | undefined): Record<string, unknown> {
  const next = a.next;
  const lastError = a.errorMessage ?? (a.statusCode && a.outcome !== 'success' ? `HTTP ${a.statusCode}` : null);
  return {
    status: next.status,
    nextAt: next.status === 'pending' ? next.at : null,
    deadReason: next.status === 'dead' ? next.reason : null,
    statusCode: a.statusCode,
    lastError: next.status === 'succeeded' ? null : lastError,
    deliveryId: uuidOf('delivery', a.deliveryId),
    attemptNumber: a.attemptNumber,
    leaseToken: a.leaseToken,
    attemptId: newStoredId(),
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
  };
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
  return successesRecorded(items, await run(db, successesStatement, successesParams(items, limits, handOffLeaseMs)));
}

function successesParams(items: SuccessItem[], limits: HealthLimits, handOffLeaseMs: number): Record<string, unknown> {
  const rs = items.map((i) => i.record);
  return {
    deliveryIds: rs.map((r) => uuidOf('delivery', r.deliveryId)),
    attemptNumbers: rs.map((r) => r.attemptNumber),
    attemptIds: rs.map(() => newStoredId()),
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
  };
}

/** The record statement's rows as each item's result: the first row says which items were applied; the rest are the handed deliveries. */
function successesRecorded(items: SuccessItem[], rows: pg.QueryResultRow[]): Recorded[] {
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

/** The hand-off a recorded attempt makes (record_successes_v4, record_attempt_v4), called on its own. */
const warmHandOffStatement = statement('warm_up_hand_off', 'SELECT * FROM hand_off_v4(:endpointIds::uuid[], :slots::int[], :threshold::int, :lease::int)');

/** Settings of the warm-up's own calls: the circuit stays closed, and nothing it claims outlives its transaction. */
const warmLimits: HealthLimits = { circuitFailureThreshold: 100, circuitCooldownSeconds: 1 };
const warmLeaseMs = 60_000;

/** Around the warm-up's admission round (see warmDispatch). */
const warmSavepointStatement = statement('warm_up_savepoint', 'SAVEPOINT warm_up_admission');
const warmSavepointBackStatement = statement('warm_up_savepoint_back', 'ROLLBACK TO SAVEPOINT warm_up_admission');

/**
 * A worker's hot path on two deliveries of the warm-up's own (publishWarmUpEvents), inside the
 * warm-up's rolled-back transaction: an admission round without a slot of this process, the first
 * delivery handed to a slot, its success recorded, which hands on the second, and a failure of that
 * one recorded, so every statement of each function is planned before a real call needs it
 * (docs/architecture.md, "Warm start"). Also the claim of a queued delivery, for one that does not
 * exist. Throws when a step did not do what it should, so a warm-up that warmed nothing is reported.
 */
export const warmDispatch: WarmUp = async (run) => {
  await run(claimStatement, { lease: 0, id: lowestStoredId, eventId: lowestStoredId });
  const { endpointId } = await publishWarmUpEvents(run, 2);
  // A round with no slot writes nothing, but try-locks each endpoint with due work and locks one
  // delivery of each: given back at once, as a real round's commit would, not held to the rollback.
  await run(warmSavepointStatement, {});
  const round = await run(admitStatement, { threshold: warmLimits.circuitFailureThreshold, batch: 1, queuedLeaseSeconds: 1, localCount: 0, inFlightLeaseMs: warmLeaseMs, allLocal: true });
  await run(warmSavepointBackStatement, {});
  if (!round.some((r) => r.id === null && r.ep_id === endpointId)) throw new Error('warm-up: the admission round did not report the warm-up endpoint waiting');
  const [handed] = await run(warmHandOffStatement, { endpointIds: [endpointId], slots: [1], threshold: warmLimits.circuitFailureThreshold, lease: warmLeaseMs });
  if (!handed) throw new Error('warm-up: no delivery was handed to a slot');
  const items: SuccessItem[] = [{ record: warmResult(rowToClaimed(handed), 'success'), handOff: true }];
  const [recorded] = successesRecorded(items, await run(successesStatement, successesParams(items, warmLimits, warmLeaseMs)));
  if (!recorded?.applied || !recorded.next) throw new Error('warm-up: the success was not recorded or handed nothing on');
  const [failed] = await run(recordStatement, recordParams(warmResult(recorded.next, 'retry'), warmLimits, warmLeaseMs));
  if (failed?.applied !== true) throw new Error('warm-up: the failure was not recorded');
};

function warmResult(d: ClaimedDelivery, outcome: 'success' | 'retry'): AttemptRecord {
  const success = outcome === 'success';
  return {
    deliveryId: d.id, endpointId: d.endpoint.id, attemptNumber: d.attempt_count, leaseToken: d.lease_token, trigger: d.next_trigger,
    startedAt: new Date(), durationMs: 1, statusCode: success ? 200 : 503, outcome, errorClass: success ? null : 'http_503', errorMessage: null,
    responseExcerpt: null, next: success ? { status: 'succeeded' } : { status: 'pending', at: new Date(Date.now() + 3_600_000) }, endpointFailure: !success,
  };
}
