import type { Logger } from 'pino';
import type { AdmissionRound, AdmittedDelivery, ClaimedDelivery } from '../delivery/index.js';
import { metrics } from '../metrics/registry.js';
import type { FairShare } from './fair-share.js';

export interface AdmissionLoopDeps {
  /** One admission round, given how many deliveries this process can start itself right now. */
  admit(localSlots: number, mode: 'share' | 'all'): Promise<AdmissionRound>;
  /** Free slots of this process: admitted work beyond them goes to Redis for any worker. */
  freeSlots(): number;
  /** True while other worker processes are there to take a share of a backlog through Redis; asked once per round, before it admits. */
  othersWorking(): boolean;
  /** Starts a slot for a delivery admitted straight to in_flight. */
  startLocal(claimed: ClaimedDelivery): void;
  /** The job queue (shard) a queued delivery goes to. */
  shardOf(delivery: AdmittedDelivery): number;
  /** Hands queued deliveries of one shard to Redis (one job each). */
  enqueue(shard: number, queued: AdmittedDelivery[]): Promise<void>;
  /** Takes back queued deliveries that could not be handed to Redis. */
  unqueue(queued: AdmittedDelivery[]): Promise<void>;
  logger: Logger;
  /** Polling interval for retries coming due and anything a lost wake-up left waiting. */
  intervalMs?: number;
  /** Told what each round left waiting for a slot; a slot freed while work waits wakes a round at once. */
  fairShare?: FairShare;
}

/** After a round that found endpoints being admitted by another process: look again this soon. */
const contendedRetryMs = 5;
/** After Redis refused a hand-off, how long every admitted delivery runs in this process instead. */
const redisFailingMs = 5_000;
/**
 * A job queue's connection waits for Redis to come back instead of failing (BullMQ needs it so), so a
 * hand-off to an unreachable Redis would hang the loop. Past this, it counts as refused.
 */
const enqueueTimeoutMs = 2_000;
/**
 * A slot that ended frees capacity, but it usually ended because its endpoint had nothing due (the
 * record statement looked), and new work wakes a round of its own. So a freed slot asks for a round
 * within this long instead of at once: at hundreds of events a second that is a few rounds instead
 * of one per event, and the rare delivery that waited for the slot waits this much longer.
 */
const freedSlotDelayMs = 20;
/**
 * Rounds start at least this far apart. At hundreds of events a second each commit would otherwise
 * start a round of its own; spaced like this, a round takes every commit of the last few
 * milliseconds at once, for a round trip per few events instead of one per event.
 */
const minRoundGapMs = 3;

/**
 * Runs admission rounds: when woken (new work committed in this process or announced by another, a
 * slot freed) and on a short timer for retries coming due. Wake-ups while a round is running
 * coalesce into one more round, so a burst of commits costs a few rounds, not one each.
 *
 * A live event therefore goes: commit → wake → one admission round that puts it in flight for a
 * free slot of this process → HTTP attempt. No Redis round trip and no polling interval on the way.
 */
export class AdmissionLoop {
  private running = false;
  /** The round in progress, so that stop() can wait for it. */
  private round: Promise<void> = Promise.resolve();
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private freedTimer: NodeJS.Timeout | undefined;
  private gapTimer: NodeJS.Timeout | undefined;
  private lastRoundEndedAt = 0;
  private stopped = false;
  private redisFailingUntil = 0;

  constructor(private readonly deps: AdmissionLoopDeps) {}

  start(): void {
    this.timer = setInterval(() => this.wake(), this.deps.intervalMs ?? 250);
    this.timer.unref();
    this.wake();
  }

  /**
   * Starts no more rounds and resolves once the round in progress (if any) has ended: the work it
   * claimed has then been started or handed over, and the process's pool may close.
   */
  stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.retryTimer);
    clearTimeout(this.freedTimer);
    clearTimeout(this.gapTimer);
    return this.round;
  }

  /**
   * A slot ended: a round soon, together with the other slots that end meanwhile. At once when
   * work is waiting for a slot: the slot most likely ended to make room for it (fair-share.ts).
   */
  slotFreed = (): void => {
    if (this.stopped) return;
    if (this.deps.fairShare?.hasWaiting()) {
      clearTimeout(this.freedTimer);
      this.freedTimer = undefined;
      this.wake();
      return;
    }
    if (this.freedTimer) return;
    this.freedTimer = setTimeout(() => {
      this.freedTimer = undefined;
      this.wake();
    }, freedSlotDelayMs);
    this.freedTimer.unref();
  };

  wake = (): void => {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    const wait = this.lastRoundEndedAt + minRoundGapMs - performance.now();
    if (wait > 0) {
      this.gapTimer ??= setTimeout(() => {
        this.gapTimer = undefined;
        this.wake();
      }, wait);
      return;
    }
    this.running = true;
    this.round = this.loop().finally(() => {
      this.running = false;
      this.lastRoundEndedAt = performance.now();
    });
  };

  private async loop(): Promise<void> {
    do {
      this.again = false;
      try {
        // Alone, or with Redis failing, a process keeps all it admits: Redis would only add hops.
        // Asked on every round, first: the dispatcher ties the slots this round starts to the answer.
        const others = this.deps.othersWorking();
        const mode = Date.now() < this.redisFailingUntil || !others ? 'all' : 'share';
        const localSlots = this.deps.freeSlots();
        const round = await this.deps.admit(localSlots, mode);
        metrics.admissionRounds.inc({ outcome: round.claimed.length + round.queued.length > 0 ? 'admitted' : 'empty' });
        // Queued work waits too when this process had no slot left for it: in Redis, behind
        // whatever job comes first, unless a slot yields.
        this.deps.fairShare?.setWaiting(round.waiting);
        if (round.claimed.length >= localSlots) {
          this.deps.fairShare?.queuedWhileFull(round.queued.map((d) => ({ id: d.id, tenantId: d.tenant_id, endpointId: d.endpoint_id })));
        }
        for (const claimed of round.claimed) this.deps.startLocal(claimed);
        if (round.queued.length > 0) await this.enqueue(round.queued);
        // A full round may have left more due work behind.
        if (round.claimed.length + round.queued.length > 0) this.again = true;
        // Another process held some endpoints; its snapshot may predate what woke us.
        if (round.skipped > 0) this.scheduleRetry(contendedRetryMs);
      } catch (err) {
        // Admitted rows that never reached Redis keep their lease and come back through the sweeper.
        this.deps.logger.warn({ err }, 'admission round failed; retrying');
        this.scheduleRetry(500);
        return;
      }
    } while (this.again && !this.stopped);
  }

  /**
   * Redis failing costs no delivery and stops none: what it refused goes back to pending at once
   * (not after its lease), and for a while this process runs everything it admits itself. Shards
   * are handed over side by side and each on its own: on a cluster whose master of one shard is
   * down, only that shard's deliveries come back.
   */
  private async enqueue(queued: AdmittedDelivery[]): Promise<void> {
    const byShard = new Map<number, AdmittedDelivery[]>();
    for (const d of queued) {
      const shard = this.deps.shardOf(d);
      const group = byShard.get(shard);
      if (group) group.push(d);
      else byShard.set(shard, [d]);
    }
    const results = await Promise.allSettled([...byShard].map(([shard, jobs]) => this.handOver(shard, jobs)));
    const refused = [...byShard.values()].filter((_, i) => results[i]!.status === 'rejected');
    if (refused.length === 0) return;
    this.redisFailingUntil = Date.now() + redisFailingMs;
    const err = results.find((r) => r.status === 'rejected')!.reason as unknown;
    this.deps.logger.warn({ err, deliveries: refused.flat().length }, 'Redis refused admitted work; dispatching in this process only for now');
    // If this fails too (PostgreSQL as well), the lease brings them back.
    await this.deps.unqueue(refused.flat()).catch(() => undefined);
  }

  private async handOver(shard: number, queued: AdmittedDelivery[]): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`Redis did not take ${queued.length} jobs within ${enqueueTimeoutMs} ms`)), enqueueTimeoutMs);
    });
    try {
      // Jobs that Redis takes later find their deliveries pending again: a claim needs `queued`.
      await Promise.race([this.deps.enqueue(shard, queued), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  private scheduleRetry(ms: number): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(this.wake, ms);
    this.retryTimer.unref();
  }
}
