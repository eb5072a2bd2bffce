/**
 * The delivery lifecycle: the one place where a delivery changes status. Everything outside
 * src/delivery/ reaches it through ./index.ts.
 *
 *                admit                          claim                    record (2xx)
 *  (fan-out) ─▶ pending ──────▶ queued (Redis) ──────▶ in_flight ────────────────────▶ succeeded
 *                 │  ▲  └──────────── admit to a local slot ──▲  │ record (retry)          │
 *                 │  │                                         │  ├────────▶ pending       │
 *                 │  └──── sweep: lease lost (queued/in_flight)┘  │ record (terminal,      │
 *                 │                                              │  max attempts, max age) │
 *                 └── sweep: max age, endpoint disabled/deleted ─┴────────▶ dead ◀─────────┘ (replay: → pending)
 *                                     hand-off: pending ─▶ in_flight for the slot a result frees
 *                                     claim of a paused endpoint's delivery: queued ─▶ pending
 *
 * The words (statuses, dead-letter reasons, triggers, the allowed transitions) are in
 * domain/delivery-status.ts; the invariant checker of the chaos suite holds every run to them.
 * Which delivery an endpoint may start next is one SQL function, `next_due`
 * (db/functions/next_due.sql), asked by admission and by both hand-offs. A slot's claim (admission
 * to a local slot, a hand-off) is kept in the delivery's queue row only, so `deliveries` is written
 * when a delivery is created and when a result is recorded; a Redis job's claim is written to
 * `deliveries`. One rule says which (db/functions/claim_in_queue.sql), asked by every reader of a
 * claim (claim_held_v2, delivery_state, the lost-worker sweep); lock_waiting picks waiting work
 * for what finishes it. The SQL of each step:
 *
 *   sql/admit.ts         pending → queued | in_flight          db/functions/admit_due_v4.sql
 *   sql/attempts.ts      queued → in_flight (claim)            db/functions/claim_delivery.sql
 *                        in_flight → succeeded | pending | dead (record),
 *                        then pending → in_flight (hand-off)   db/functions/record_attempt_v4.sql,
 *                                                              record_successes_v4.sql, hand_off_v4.sql
 *                        in_flight → pending, attempt given back (egressFailed: the proxy failed)
 *   sql/sweep.ts         lost leases back to pending; max age and disabled endpoints to dead
 *   sql/mirror-vacuum.ts keeps delivery_queue (the mirror of unfinished deliveries that every
 *                        step above reads to find rows; migration 20261201000024) quick to walk
 *   sql/operator.ts      endpoint deleted: waiting → dead; replay: dead | succeeded → pending
 *   sql/backfill.ts      backfill: (none) → pending, paced, for past events an endpoint lacks
 *   fan-out              SQL function `fan_out_write`, called by intake, publishing and an
 *                        endpoint's test event: one pending delivery per matching endpoint, or a dead one
 *                        (`endpoint_disabled`) for a disabled endpoint
 *   endpoint-health.ts   the endpoint's status and circuit, which the steps above obey; a paused
 *                        endpoint starts nothing (next_due) and keeps its waiting work pending
 *
 * Side effects (metrics, operational events, waking admission) go through `LifecycleEffects`, which
 * the composition root (platform.ts) wires. Every dead letter is counted here and nowhere else.
 */
import type { Knex } from 'knex';
import type { DeadLetterReason } from '../domain/delivery-status.js';
import type { SecretBox } from '../domain/secret-box.js';
import { metrics } from '../metrics/registry.js';
import { deleteEndpoint, updateEndpoint, type EndpointInput, type EndpointRow } from '../store/endpoints-store.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { startBackfill, type BackfillPacing, type BackfillRequest } from '../store/backfill-store.js';
import { replayDelivery, startBulkReplay, type ReplayFilter, type ReplayPacing } from '../store/replays-store.js';
import type { TenantScope } from '../store/tenant-scope.js';
import { backfilled, disableFailing, disableGone, warnFailing, type DisabledEndpoint, type FailingEndpoint } from './endpoint-health.js';
import { admitDue, type AdmissionLimits, type AdmissionRound, type LocalClaims } from './sql/admit.js';
import { claimDelivery, recordAttempt, recordEgressFailure, recordSuccesses, type AttemptRecord, type EgressFailure, type HealthLimits, type Recorded, type SuccessItem } from './sql/attempts.js';
import type { ClaimedDelivery } from './sql/claimed.js';
import { insertBackfillDeliveries } from './sql/backfill.js';
import { inSpan, storedTraceParent, type Span } from '../infra/tracing.js';
import { deadLetterForDeletedEndpoint, restartDeliveriesPaced, restartDelivery } from './sql/operator.js';
import { vacuumMirror } from './sql/mirror-vacuum.js';
import { sweep, unqueue, type SweepLimits } from './sql/sweep.js';

/** What the lifecycle asks of the rest of the platform; wired in platform.ts. */
export interface LifecycleEffects {
  /** Deliveries became dead (the dead-letter metric). */
  deadLettered(reason: DeadLetterReason, count: number): void;
  /** Operational events for deliveries that became dead, after commit; what their fan-out created. */
  announceDead(deliveryIds: string[]): Promise<FanOutResult>;
  /** An operational event for an endpoint the platform disabled; what its fan-out created. */
  announceEndpointDisabled(endpoint: DisabledEndpoint): Promise<FanOutResult>;
  /** Operational events for an endpoint's failure streak passing warning thresholds; what their fan-out created. */
  announceEndpointFailing(endpoint: FailingEndpoint): Promise<FanOutResult>;
  /** An operational event for an endpoint a tenant paused or resumed; what its fan-out created. */
  announceEndpointHeld(change: EndpointHeld): Promise<FanOutResult>;
  /** New pending work exists: admission should run. */
  newWork(): void;
}

/** A pause or a resume, as `platform.endpoint.paused` / `platform.endpoint.resumed` report it. */
export interface EndpointHeld {
  kind: 'paused' | 'resumed';
  id: string;
  tenantId: string;
  reason: string | null;
  at: Date;
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

  /**
   * Deletes an endpoint; its waiting deliveries are dead-lettered in the same transaction, but for
   * any a claim or a result holds at that instant, which the sweep's next round dead-letters
   * (lock_waiting). Answers whether there was such an endpoint.
   */
  async deleteEndpoint(scope: TenantScope, endpointId: string): Promise<boolean> {
    const deleted = await deleteEndpoint(scope, endpointId, deadLetterForDeletedEndpoint);
    if (deleted && deleted.deadLettered > 0) this.effects.deadLettered('endpoint_deleted', deleted.deadLettered);
    return deleted !== null;
  }

  /**
   * Changes an endpoint (PATCH, pause, resume); answers the updated row, or undefined when there is
   * no such endpoint. A resume, a re-enable or a new URL (whose circuit starts closed) wakes
   * admission, since work held back may now go; a pause or a resume is announced.
   */
  async updateEndpoint(scope: TenantScope, box: SecretBox, endpointId: string, input: EndpointInput): Promise<EndpointRow | undefined> {
    const updated = await updateEndpoint(scope, box, endpointId, input);
    if (!updated) return undefined;
    const { row, statusChange } = updated;
    if (statusChange === 'resumed' || statusChange === 'enabled' || input.url !== undefined) this.effects.newWork();
    if (statusChange === 'paused' || statusChange === 'resumed') {
      const held = { kind: statusChange, id: row.id, tenantId: scope.tenantId, reason: input.statusReason ?? null, at: row.updated_at };
      this.fannedOut(await this.effects.announceEndpointHeld(held));
    }
    return row;
  }

  /** Replays one dead or succeeded delivery (back to pending, audited); answers why not when it cannot. */
  async replayDelivery(scope: TenantScope, deliveryId: string, reason: string, pacing: ReplayPacing, requestSpan?: Span) {
    return inSpan('webhook.replay', requestSpan, { 'webhook.replay.kind': 'single', 'webhook.delivery_id': deliveryId }, async (span) => {
      const traceParent = storedTraceParent(span);
      const result = await replayDelivery(scope, deliveryId, reason, pacing, (trx, id, maxAge) => restartDelivery(trx, id, maxAge, traceParent));
      if (result === 'replayed') this.replayed('single', 1);
      return result;
    });
  }

  /** Starts a bulk replay: the matching deliveries go back to pending, paced. */
  async startBulkReplay(scope: TenantScope, filter: ReplayFilter, reason: string, limit: number, pacing: ReplayPacing, requestSpan?: Span) {
    return inSpan('webhook.replay', requestSpan, { 'webhook.replay.kind': 'bulk' }, async (span) => {
      const traceParent = storedTraceParent(span);
      const started = await startBulkReplay(scope, filter, reason, limit, pacing, (trx, ids, p) => restartDeliveriesPaced(trx, ids, { ...p, traceParent }));
      span?.setAttributes({ 'webhook.replay_id': started.id, 'webhook.replay.deliveries': started.count });
      this.replayed('bulk', started.count);
      return started;
    });
  }

  /**
   * Creates the deliveries an endpoint lacks for past events (see store/backfill-store.ts), paced
   * like a bulk replay; answers the job to follow at GET /v1/replays/:id, or why not.
   */
  async backfill(scope: TenantScope, endpointId: string, request: BackfillRequest, pacing: BackfillPacing) {
    // A backfill is a late fan-out of old events to one endpoint: its attempts join each event's own trace.
    const started = await startBackfill(scope, endpointId, request, pacing, async (trx, rows) => {
      const written = await insertBackfillDeliveries(trx, { ...rows, tenantId: scope.tenantId, ratePerSecond: pacing.ratePerSecond, defaultMaxAgeSeconds: pacing.defaultMaxAgeSeconds });
      if (written.length > 0) await backfilled(trx, endpointId);
      return written;
    });
    if (typeof started !== 'string' && started.total > 0) this.effects.newWork();
    return started;
  }

  private replayed(kind: 'single' | 'bulk', count: number): void {
    if (count === 0) return;
    // One count per delivery, so the rate reads as "deliveries replayed".
    metrics.replays.inc({ kind }, count);
    this.effects.newWork();
  }

  admit(local?: LocalClaims): Promise<AdmissionRound> {
    return admitDue(this.db, this.limits, local);
  }

  /** queued → pending at once, for admitted work that Redis refused (instead of waiting out its lease). */
  unqueue(deliveryIds: string[]): Promise<number> {
    return unqueue(this.db, deliveryIds);
  }

  /**
   * queued → in_flight; a delivery whose endpoint was paused since admission comes back `pending`
   * (it waits for the resume), one whose endpoint was disabled or deleted comes back `dead`; both unsent.
   * `eventId`, the delivery's event, as admission returned it (see claimDelivery).
   */
  async claim(deliveryId: string, leaseMs: number, eventId?: string): Promise<ClaimedDelivery | undefined> {
    const claimed = await claimDelivery(this.db, deliveryId, leaseMs, eventId);
    if (claimed?.status === 'dead') this.effects.deadLettered(claimed.endpoint.deleted_at ? 'endpoint_deleted' : 'endpoint_disabled', 1);
    return claimed;
  }

  /** Disables the endpoint that answered 410 before its attempt is recorded (see deliver.ts). */
  disableGoneEndpoint(endpoint: DisabledEndpoint): Promise<boolean> {
    return disableGone(this.db, endpoint);
  }

  /** Records one attempt's result (any outcome); see sql/attempts.ts for the hand-off. */
  async record(a: AttemptRecord, handOffLeaseMs?: number): Promise<Recorded> {
    const recorded = await recordAttempt(this.db, a, this.limits, handOffLeaseMs);
    if (recorded.applied && a.next.status === 'dead') this.effects.deadLettered(a.next.reason, 1);
    return recorded;
  }

  /**
   * The egress proxy failed before the target answered: back to pending at `nextAt` with the attempt
   * given back, nothing counted against the endpoint. False when the delivery is no longer in flight
   * on that attempt (its lease was taken back): nothing changed.
   */
  async egressFailed(f: EgressFailure): Promise<boolean> {
    const applied = await recordEgressFailure(this.db, f);
    if (applied) this.effects.newWork();
    return applied;
  }

  /** Records the successes of several slots in one statement (group commit). */
  recordSuccesses(items: SuccessItem[], handOffLeaseMs: number): Promise<Recorded[]> {
    return recordSuccesses(this.db, items, this.limits, handOffLeaseMs);
  }

  /**
   * Operational events after a dead letter, a failure warning or a disable has committed. Best
   * effort: the change itself is already recorded and visible, so a failure here is left to the
   * caller to log. Warnings go before disables, so a subscriber reads a streak's story in order.
   */
  async announce(deadIds: string[], disabled: DisabledEndpoint[], failing: FailingEndpoint[] = []): Promise<void> {
    if (deadIds.length > 0) this.fannedOut(await this.effects.announceDead(deadIds));
    for (const ep of failing) this.fannedOut(await this.effects.announceEndpointFailing(ep));
    for (const ep of disabled) this.fannedOut(await this.effects.announceEndpointDisabled(ep));
  }

  /**
   * Takes back lost leases, dead-letters what can no longer be delivered, warns about and disables
   * endpoints failing too long; returns what it did. Warnings are raised before the disable, so an
   * endpoint first seen past its whole window is still warned at every threshold, then disabled.
   */
  async sweep() {
    const window = this.limits.autoDisableAfterSeconds;
    // Dead letters are counted as each step commits, so a failure of a later step cannot lose them.
    const swept = await sweep(this.db, this.limits, (reason, count) => this.effects.deadLettered(reason, count));
    if (swept.requeued || swept.lostInFlight) this.effects.newWork();
    const failingEndpoints = await warnFailing(this.db, window);
    return { ...swept, failingEndpoints, disabledEndpoints: await disableFailing(this.db, window) };
  }

  /** Keeps delivery_queue quick to walk (see sql/mirror-vacuum.ts); true when this call vacuumed. */
  vacuumMirror(): Promise<boolean> {
    return vacuumMirror(this.db);
  }
}
