import type { WaitingWork } from '../delivery/index.js';

/**
 * Fair share of a worker process's slots between tenants, and between the endpoints of a tenant,
 * when the process is full (docs/architecture.md, "Fair share under a drain").
 *
 * Admission (admit_due_v4) gives free slots to whoever has the fewest in flight. This is the other
 * half: a slot that finishes an attempt hands itself on to its endpoint's next delivery only
 * while no other tenant's due work waits for a slot of this process with fewer slots than this
 * slot's tenant holds (and, inside a tenant, no endpoint waits with clearly fewer than this one).
 * Otherwise the slot ends, and the round it wakes at once gives it to the waiting work. So a
 * backlog's hand-off chains never keep a tenant with live events out of a full process: it waits
 * for the next attempt to finish, not for a chain of up to 500.
 *
 * A tenant or endpoint with nothing running here always gets a slot. Beyond that, a slot is given
 * up only to one that would still hold no more than the giver after the exchange, so two backlogs
 * settle at an even split instead of trading a slot back and forth on every attempt.
 */
export class FairShare {
  private readonly byTenant = new Map<string, number>();
  private readonly byEndpoint = new Map<string, number>();
  private waiting: WaitingWork[] = [];
  /**
   * Deliveries this process queued to Redis while its slots were full, until a slot here starts
   * them or `queuedWaitMs` passes (another process may have started them: then a slot yielded for
   * nothing, which costs one admission round, never a delivery).
   */
  private readonly queued = new Map<string, WaitingWork & { until: number }>();

  constructor(
    private readonly queuedWaitMs = 2_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** A slot starts on an endpoint with `deliveryId`; the returned function ends it. */
  enter(tenantId: string, endpointId: string, deliveryId?: string): () => void {
    if (deliveryId !== undefined) this.queued.delete(deliveryId);
    bump(this.byTenant, tenantId, 1);
    bump(this.byEndpoint, endpointId, 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      bump(this.byTenant, tenantId, -1);
      bump(this.byEndpoint, endpointId, -1);
    };
  }

  /** What the latest admission round found waiting for a slot of this process (replaces the last). */
  setWaiting(waiting: WaitingWork[]): void {
    this.waiting = waiting;
  }

  /** Deliveries queued to Redis because this process had no slot for them: they wait as well. */
  queuedWhileFull(deliveries: Array<WaitingWork & { id: string }>): void {
    const until = this.now() + this.queuedWaitMs;
    for (const d of deliveries) this.queued.set(d.id, { tenantId: d.tenantId, endpointId: d.endpointId, until });
  }

  /** True while work waits for a slot: a freed slot should go to it at once. */
  hasWaiting(): boolean {
    return this.waiting.length > 0 || this.queuedWaiting().length > 0;
  }

  private queuedWaiting(): WaitingWork[] {
    const now = this.now();
    for (const [id, w] of this.queued) if (w.until <= now) this.queued.delete(id);
    return [...this.queued.values()];
  }

  /** May a slot of this tenant and endpoint, having just finished an attempt, take the endpoint's next? */
  mayHandOff(tenantId: string, endpointId: string): boolean {
    const tenantSlots = this.byTenant.get(tenantId) ?? 0;
    const endpointSlots = this.byEndpoint.get(endpointId) ?? 0;
    for (const w of this.waiting.length > 0 || this.queued.size > 0 ? [...this.waiting, ...this.queuedWaiting()] : []) {
      if (w.tenantId !== tenantId) {
        if (yields(this.byTenant.get(w.tenantId) ?? 0, tenantSlots)) return false;
      } else if (w.endpointId !== endpointId && yields(this.byEndpoint.get(w.endpointId) ?? 0, endpointSlots)) {
        return false;
      }
    }
    return true;
  }

  /** Slots running for a tenant in this process (for tests and metrics). */
  slotsOf(tenantId: string): number {
    return this.byTenant.get(tenantId) ?? 0;
  }
}

/** Whether a holder of `mine` slots gives one up to a waiter holding `theirs`. */
export function yields(theirs: number, mine: number): boolean {
  return theirs === 0 || theirs + 1 < mine;
}

function bump(map: Map<string, number>, key: string, by: number): void {
  const n = (map.get(key) ?? 0) + by;
  if (n <= 0) map.delete(key);
  else map.set(key, n);
}
