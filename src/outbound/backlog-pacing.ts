import { performance } from 'node:perf_hooks';
import { FIRST_ATTEMPT_OBJECTIVE_SECONDS } from '../domain/slo.js';

/**
 * Backlogs yield to live work (docs/architecture.md, "Fair share under a drain").
 *
 * The fair share (fair-share.ts, admit_due_v4) decides who gets a slot. This decides how fast late
 * work may start once it has one, because a slot is not the only thing work shares: a drain that
 * keeps the worker, PostgreSQL and the machine's cores busy slows every live event, whoever's.
 *
 * - A first attempt is **live** while it starts within the delivery-latency objective of its
 *   event's acceptance (src/domain/slo.ts, 5 s) and **late** after that (a drain, an endpoint back
 *   from an outage or a pause). Only late work is paced, so pacing never costs the objective an
 *   attempt. Retries, replays and backfills are neither: their due time is not known here, and
 *   replays and backfills have their own pacing. The line assumes this process's clock and
 *   PostgreSQL's agree to well within the objective (NTP does).
 * - Live attempts' waits (acceptance → start) are taken per tick: their median, against the best
 *   tick median of the last `baselineSeconds`, so a constant skew between the clocks cancels out
 *   here. The median, not the worst: a drain slows every live attempt, while a single slow one is
 *   as likely the machine's noise, which pacing cannot remove. When a tick's median exceeds the
 *   best by more than `targetMs`, the pace of late attempts is cut in proportion (target / excess,
 *   between a tenth and a half of the rate they ran at); each tick within the target raises it by a
 *   tenth. A drain thus gets what the live work leaves it, on any machine, and never less than
 *   `minPerSecond`.
 * - Late work that starts after none for `quietMs` starts at `minPerSecond` and earns its speed
 *   tick by tick, and so does a drain when live work starts beside it after none for `quietMs`:
 *   live events do not first wait out the ticks a cut would need. With no live work beside it,
 *   the first tick ends that (below).
 * - New work announced to this process (a publish, a callback) holds a drain at the floor for
 *   `quietMs` too, before any of it has started: in a busy worker the first live attempts would
 *   otherwise wait behind the drain they are meant to slow. A hold is not extended by more
 *   announcements, and after a hold that saw no live attempt (the work went to another worker, or
 *   was not live) announcements hold nothing until a live attempt is seen again.
 * - Without a live attempt for `quietMs` (nor a hold), or once the pace no longer binds, late work
 *   runs unpaced: a drain with nothing live beside it goes at full speed.
 * - No start is booked more than `maxWaitMs` ahead: the wait comes out of the attempt's lease.
 * - Late work of an endpoint that had a live attempt within `quietMs` is never paced: its live work
 *   waits behind it (earliest due first), so pacing it would only turn the live work late too.
 *   Pacing acts between endpoints (and so between tenants), never inside one endpoint's line.
 *
 * Per process: each worker paces the late work it runs by the live work it sees.
 */
export interface BacklogPacingOptions {
  /** How much the live attempts' median wait may exceed its recent best before late work is slowed (ms). */
  targetMs: number;
  /** The slowest late work is ever paced to, per process (attempts per second). */
  minPerSecond: number;
  /** The longest one late attempt is made to wait (ms). */
  maxWaitMs?: number;
  liveWindowMs?: number;
  tickMs?: number;
  quietMs?: number;
  baselineSeconds?: number;
  /** A monotonic clock in ms. */
  now?: () => number;
}

export class BacklogPacing {
  /** Late attempts per second while paced; null while unpaced. */
  private rate: number | null = null;
  /** When the next late attempt may start (a virtual schedule: each start books 1/rate). */
  private nextStartAt = 0;
  private tickStartedAt: number;
  /** The live waits of the current tick (the first `maxSamples`). */
  private tickWaits: number[] = [];
  private lateInTick = 0;
  private lastLiveAt = Number.NEGATIVE_INFINITY;
  /** When each endpoint last had a live attempt here (entries older than `quietMs` are dropped). */
  private readonly liveByEndpoint = new Map<string, number>();
  private lastLateAt = Number.NEGATIVE_INFINITY;
  /** The last hold for announced work: when it began, and until when it keeps the pace. */
  private heldFrom = Number.NEGATIVE_INFINITY;
  private heldUntil = Number.NEGATIVE_INFINITY;
  /** The best tick median of each recent second: [second, ms]. */
  private bestBySecond: Array<[number, number]> = [];
  private readonly maxWaitMs: number;
  private readonly liveWindowMs: number;
  private readonly tickMs: number;
  private readonly quietMs: number;
  private readonly baselineSeconds: number;
  private readonly now: () => number;

  constructor(private readonly options: BacklogPacingOptions) {
    this.maxWaitMs = options.maxWaitMs ?? 2_000;
    this.liveWindowMs = options.liveWindowMs ?? FIRST_ATTEMPT_OBJECTIVE_SECONDS * 1000;
    this.tickMs = options.tickMs ?? 250;
    this.quietMs = options.quietMs ?? 2_000;
    this.baselineSeconds = options.baselineSeconds ?? 30;
    this.now = options.now ?? (() => performance.now());
    this.tickStartedAt = this.now();
  }

  /**
   * A first attempt is about to start, `waitMs` after its event was accepted (undefined for any
   * other attempt). Answers how many ms it must wait first: 0 unless it is late and late work is paced.
   */
  beforeAttempt(waitMs: number | undefined, endpointId: string): number {
    if (this.options.targetMs <= 0 || waitMs === undefined) return 0;
    const now = this.now();
    this.advance(now);
    if (waitMs <= this.liveWindowMs) {
      this.restartBesideLive(now);
      this.lastLiveAt = now;
      this.liveByEndpoint.set(endpointId, now);
      if (this.tickWaits.length < maxSamples) this.tickWaits.push(waitMs);
      return 0;
    }
    this.lateInTick++;
    if (this.rate === null && now - this.lastLateAt > this.quietMs) this.pace(this.options.minPerSecond, now);
    this.lastLateAt = now;
    // An endpoint's live work waits behind its own late work (earliest due first): pacing that
    // would only delay its live work further, until all of it was late.
    if (this.rate === null || now - (this.liveByEndpoint.get(endpointId) ?? Number.NEGATIVE_INFINITY) <= this.quietMs) return 0;
    const startAt = Math.min(Math.max(now, this.nextStartAt), now + this.maxWaitMs);
    this.nextStartAt = startAt + 1000 / this.rate;
    return startAt - now;
  }

  /**
   * New work was announced (a publish, a callback): live attempts may follow, and the first of
   * them should not wait behind a drain running unpaced (see the header for how long this holds).
   */
  workArrived(): void {
    if (this.options.targetMs <= 0) return;
    const now = this.now();
    if (now <= this.heldUntil || this.heldFrom > this.lastLiveAt) return;
    if (this.restartBesideLive(now)) {
      this.heldFrom = now;
      this.heldUntil = now + this.quietMs;
    }
  }

  /** Late attempts per second allowed now; 0 while unpaced (the metric's value). */
  pacedPerSecond(): number {
    if (this.options.targetMs > 0) this.advance(this.now());
    return this.rate ?? 0;
  }

  /** Live work after a quiet spell, beside a drain running unpaced: the drain starts over from the floor. */
  private restartBesideLive(now: number): boolean {
    if (this.rate !== null || now - this.lastLiveAt <= this.quietMs || now - this.lastLateAt > this.quietMs || now <= this.heldUntil) return false;
    this.pace(this.options.minPerSecond, now);
    return true;
  }

  private pace(rate: number, now: number): void {
    if (this.rate === null) this.nextStartAt = now;
    this.rate = rate;
  }

  private remember(now: number, medianMs: number): void {
    const second = Math.floor(now / 1000);
    const last = this.bestBySecond.at(-1);
    if (last && last[0] === second) last[1] = Math.min(last[1], medianMs);
    else this.bestBySecond.push([second, medianMs]);
    while (this.bestBySecond.length > 0 && this.bestBySecond[0]![0] <= second - this.baselineSeconds) this.bestBySecond.shift();
  }

  private bestWait(): number {
    let best = Number.POSITIVE_INFINITY;
    for (const [, ms] of this.bestBySecond) best = Math.min(best, ms);
    return best;
  }

  /** Closes the tick that `now` ends, if it has lasted `tickMs`: the pace follows what it saw. */
  private advance(now: number): void {
    const elapsed = now - this.tickStartedAt;
    if (elapsed < this.tickMs) return;
    const lateRate = (this.lateInTick * 1000) / elapsed;
    const min = this.options.minPerSecond;
    if (now - this.lastLiveAt > this.quietMs && now > this.heldUntil) {
      this.rate = null;
    } else if (this.tickWaits.length > 0) {
      const median = medianOf(this.tickWaits);
      this.remember(now, median);
      const excess = median - this.bestWait();
      if (excess > this.options.targetMs) {
        const cut = Math.min(0.5, Math.max(0.1, this.options.targetMs / excess));
        // From the rate late work ran at: a pace it did not reach would cut nothing.
        if (this.lateInTick > 0 || this.rate !== null) {
          const ran = this.rate === null ? lateRate : Math.min(this.rate, Math.max(lateRate, min));
          this.pace(Math.max(min, ran * cut), now);
        }
      } else if (this.rate !== null) {
        this.rate += Math.max(1, this.rate / 10);
        // Late work ran at under half the pace allowed: the pace no longer binds.
        if (this.rate > 2 * Math.max(lateRate, min)) this.rate = null;
      }
    }
    for (const [endpointId, at] of this.liveByEndpoint) if (now - at > this.quietMs) this.liveByEndpoint.delete(endpointId);
    this.tickStartedAt = now;
    this.tickWaits = [];
    this.lateInTick = 0;
  }
}

/** Live waits kept per tick: enough for a median at thousands of live attempts a second. */
const maxSamples = 256;

function medianOf(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)]!;
}
