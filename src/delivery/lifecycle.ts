/**
 * The delivery lifecycle: the one place where a delivery changes status.
 *
 *                admit                          claim                    record (2xx)
 *  (fan-out) ─▶ pending ──────▶ queued (Redis) ──────▶ in_flight ────────────────────▶ succeeded
 *                 │  ▲  └──────────── admit to a local slot ──▲  │ record (retry)          │
 *                 │  │                                         │  ├────────▶ pending       │
 *                 │  └──── sweep: lease lost (queued/in_flight)┘  │ record (terminal,      │
 *                 │                                              │  max attempts, max age) │
 *                 └── sweep: max age, endpoint disabled/deleted ─┴────────▶ dead ◀─────────┘ (replay: → pending)
 *                                     hand-off: pending ─▶ in_flight for the slot a result frees
 *
 * The words (statuses, dead-letter reasons, triggers, the allowed transitions) are in
 * domain/delivery-status.ts. The SQL of each transition is in ./sql/, one file per step, each with
 * a header naming what goes in and what comes out:
 *
 *   sql/admit.ts         pending → queued | in_flight   (per-endpoint locks, capacity, rate, probe)
 *   sql/attempts.ts      queued → in_flight (claim); in_flight → succeeded | pending | dead (record);
 *                        pending → in_flight (hand-off, in the record statement)
 *   sql/sweep.ts         lost leases back to pending; max age and disabled endpoints to dead
 *   sql/queue-vacuum.ts  keeps delivery_queue (the mirror of unfinished deliveries that every
 *                        step above reads to find rows; migration 20261201000024) quick to walk
 *   sql/operator.ts      endpoint deleted: waiting → dead; replay: dead | succeeded → pending
 *   sql/head-of-line.ts  per-message ordering, shared by admission and hand-off
 *   fan-out              SQL function `fan_out_write` (migration 20261202000027), called by
 *                        `intake_accept_many` for a batch and, through `fan_out_insert`, by
 *                        `publish_event`: one pending delivery per matching endpoint, or a dead
 *                        one (`endpoint_disabled`) for a disabled endpoint
 *
 * Side effects (metrics, operational events, disabling an endpoint, waking admission) go through
 * `LifecycleEffects`, which the composition root (platform.ts) wires. Every dead letter is counted
 * here and nowhere else.
 */
import type { Knex } from 'knex';
import type { DeadLetterReason } from '../domain/delivery-status.js';
import type { FanOutResult } from '../store/fan-out.js';
import { admitDue, type AdmissionLimits, type AdmissionRound, type LocalClaims } from './sql/admit.js';
import { claimDelivery, recordAttempt, recordSuccesses, type AttemptRecord, type HealthLimits, type Recorded, type SuccessItem } from './sql/attempts.js';
import type { ClaimedDelivery } from './sql/claimed.js';
import { vacuumQueue } from './sql/queue-vacuum.js';
import { sweep, unqueue, type SweepLimits } from './sql/sweep.js';

export interface DisabledEndpoint {
  id: string;
  tenantId: string;
  reason: string;
}

/** What the lifecycle asks of the rest of the platform; wired in platform.ts. */
export interface LifecycleEffects {
  /** Deliveries became dead (the dead-letter metric). */
  deadLettered(reason: DeadLetterReason, count: number): void;
  /** Operational events for deliveries that became dead, after commit; what their fan-out created. */
  announceDead(deliveryIds: string[]): Promise<FanOutResult>;
  /** An operational event for an endpoint the platform disabled; what its fan-out created. */
  announceEndpointDisabled(endpoint: DisabledEndpoint): Promise<FanOutResult>;
  /** Disables an endpoint that answered 410 Gone (audited); true for the one call that changed it. */
  disableEndpoint(endpoint: DisabledEndpoint): Promise<boolean>;
  /** New pending work exists: admission should run. */
  newWork(): void;
}

export interface LifecycleLimits extends AdmissionLimits, HealthLimits, SweepLimits {}

export class DeliveryLifecycle {
  constructor(
    private readonly db: Knex,
    private readonly effects: LifecycleEffects,
    private readonly limits: LifecycleLimits,
  ) {}

  /** Fan-out happened in SQL (intake, publish); this accounts for what it created. */
  fannedOut(result: FanOutResult): void {
    if (result.deadDisabled > 0) this.effects.deadLettered('endpoint_disabled', result.deadDisabled);
    if (result.pending > 0) this.effects.newWork();
  }

  /** An endpoint was deleted; its waiting deliveries were dead-lettered in that transaction. */
  endpointDeleted(deadLettered: number): void {
    if (deadLettered > 0) this.effects.deadLettered('endpoint_deleted', deadLettered);
  }

  /** Deliveries were replayed (back to pending). */
  replayed(count: number): void {
    if (count > 0) this.effects.newWork();
  }

  admit(local?: LocalClaims): Promise<AdmissionRound> {
    return admitDue(this.db, this.limits, local);
  }

  /** queued → pending at once, for admitted work that Redis refused (instead of waiting out its lease). */
  unqueue(deliveryIds: string[]): Promise<number> {
    return unqueue(this.db, deliveryIds);
  }

  /** queued → in_flight; a delivery whose endpoint was disabled or deleted since admission comes back `dead`, unsent. */
  async claim(deliveryId: string, leaseMs: number): Promise<ClaimedDelivery | undefined> {
    const claimed = await claimDelivery(this.db, deliveryId, leaseMs);
    if (claimed?.status === 'dead') this.effects.deadLettered(claimed.endpoint.deleted_at ? 'endpoint_deleted' : 'endpoint_disabled', 1);
    return claimed;
  }

  /** Disables the endpoint that answered 410 before its attempt is recorded (see deliver.ts). */
  disableGoneEndpoint(endpoint: DisabledEndpoint): Promise<boolean> {
    return this.effects.disableEndpoint(endpoint);
  }

  /** Records one attempt's result (any outcome); see sql/attempts.ts for the hand-off. */
  async record(a: AttemptRecord, handOffLeaseMs?: number): Promise<Recorded> {
    const recorded = await recordAttempt(this.db, a, this.limits, handOffLeaseMs);
    if (recorded.applied && a.next.status === 'dead') this.effects.deadLettered(a.next.reason, 1);
    return recorded;
  }

  /** Records the successes of several slots in one statement (group commit). */
  recordSuccesses(items: SuccessItem[], handOffLeaseMs: number): Promise<Recorded[]> {
    return recordSuccesses(this.db, items, handOffLeaseMs);
  }

  /**
   * Operational events after a dead letter or a disable has committed. Best effort: the dead
   * delivery itself is already recorded and visible, so a failure here is left to the caller to log.
   */
  async announce(deadIds: string[], disabled: DisabledEndpoint[]): Promise<void> {
    if (deadIds.length > 0) this.fannedOut(await this.effects.announceDead(deadIds));
    for (const ep of disabled) this.fannedOut(await this.effects.announceEndpointDisabled(ep));
  }

  /** Takes back lost leases and dead-letters what can no longer be delivered; returns what it did. */
  async sweep() {
    const r = await sweep(this.db, this.limits);
    if (r.deadMaxAge) this.effects.deadLettered('max_age', r.deadMaxAge);
    if (r.deadMaxAttempts) this.effects.deadLettered('max_attempts', r.deadMaxAttempts);
    if (r.deadDisabled) this.effects.deadLettered('endpoint_disabled', r.deadDisabled);
    if (r.deadDeleted) this.effects.deadLettered('endpoint_deleted', r.deadDeleted);
    if (r.requeued || r.lostInFlight) this.effects.newWork();
    return r;
  }

  /** Keeps delivery_queue quick to walk (see sql/queue-vacuum.ts); true when this call vacuumed. */
  vacuumQueue(): Promise<boolean> {
    return vacuumQueue(this.db);
  }
}
