import { describe, expect, it } from 'vitest';
import { BacklogPacing } from '../../src/outbound/backlog-pacing.js';

/** A pacing on a clock the test moves; ticks are 250 ms, quiet 2 s, as in production. */
function pacingAt(start = 1_000_000, options: { targetMs?: number; minPerSecond?: number } = {}) {
  let now = start;
  const pacing = new BacklogPacing({ targetMs: options.targetMs ?? 3, minPerSecond: options.minPerSecond ?? 50, now: () => now });
  return {
    pacing,
    advance: (ms: number) => void (now += ms),
    /** `late` late attempts and live attempts waiting `liveWaitMs` each, spread over one 250 ms tick. */
    tick(late: number, liveWaitMs: number[] = []): number[] {
      const waits: number[] = [];
      const events = late + liveWaitMs.length;
      const end = now + 250;
      for (let i = 0; i < events; i++) {
        if (i < liveWaitMs.length) pacing.beforeAttempt(liveWaitMs[i], 'ep_live');
        else waits.push(pacing.beforeAttempt(60_000, 'ep_late'));
        now += 250 / events;
      }
      now = end;
      pacing.pacedPerSecond(); // the tick closes
      return waits;
    },
  };
}

describe('backlog pacing', () => {
  it('leaves a drain with nothing live beside it unpaced after its first tick', () => {
    const { pacing, tick } = pacingAt();
    // A backlog that appears starts at the floor: at 50/s, starts are booked 20 ms apart, and
    // late attempts asking every 12.5 ms wait 7.5 ms more each.
    const first = tick(20);
    expect(first[0]).toBe(0);
    expect(first[1]).toBeCloseTo(7.5, 6);
    expect(first[19]).toBeCloseTo(142.5, 6);
    // …and runs free once a tick shows nothing live beside it.
    expect(pacing.pacedPerSecond()).toBe(0);
    expect(tick(1_000).every((w) => w === 0)).toBe(true);
  });

  it('never paces retries, replays or backfills (no first-attempt wait), nor live attempts', () => {
    const { pacing } = pacingAt();
    expect(pacing.beforeAttempt(undefined, 'ep_late')).toBe(0);
    expect(pacing.beforeAttempt(5, 'ep_live')).toBe(0);
    expect(pacing.pacedPerSecond()).toBe(0);
  });

  /** Live work at its best (2 ms) beside a light drain, until the pace no longer binds. */
  function steady(t: ReturnType<typeof pacingAt>): void {
    for (let i = 0; i < 12; i++) t.tick(1, [2, 2, 2]);
    expect(t.pacing.pacedPerSecond()).toBe(0);
  }

  it('cuts a drain in proportion while live waits grow past the target, down to the floor', () => {
    const t = pacingAt();
    steady(t);
    t.tick(1_000, [40, 45, 50]); // the drain (4,000/s) slows live work: median 45 ms, 43 over the best
    expect(t.pacing.pacedPerSecond()).toBeCloseTo(400, 6); // 3 / 43 of it, but never below a tenth
    // Late starts are booked 1/400 s apart: 200 asking within the tick wait longer and longer.
    const waits = t.tick(200, [40, 45, 50]);
    expect(waits[0]).toBe(0);
    expect(waits[199]!).toBeCloseTo(199 * (2.5 - 250 / 203), 6);
    expect(t.pacing.pacedPerSecond()).toBe(50); // 400 × 3/43 is below the floor
  });

  it('grows the pace back by a tenth per tick within the target, and lets go once it no longer binds', () => {
    const t = pacingAt();
    steady(t);
    t.tick(1_000, [30, 30, 30]);
    t.tick(20, [30, 30, 30]);
    expect(t.pacing.pacedPerSecond()).toBe(50);
    t.tick(12, [2, 3, 2]);
    expect(t.pacing.pacedPerSecond()).toBeCloseTo(55, 5);
    t.tick(12, [2, 3, 2]);
    expect(t.pacing.pacedPerSecond()).toBeCloseTo(60.5, 5);
    // Late work now runs at a fraction of what is allowed: the pace is dropped.
    for (let i = 0; i < 8; i++) t.tick(1, [2, 2, 2]);
    expect(t.pacing.pacedPerSecond()).toBe(0);
  });

  it('judges a tick by its median, so one slow live attempt does not cut the drain', () => {
    const t = pacingAt();
    steady(t);
    t.tick(1_000, [2, 90, 3]);
    expect(t.pacing.pacedPerSecond()).toBe(0);
  });

  it('measures waits against the recent best, so a constant clock skew cancels out', () => {
    const t = pacingAt();
    for (let i = 0; i < 12; i++) t.tick(1, [502, 502, 503]); // this clock runs 500 ms ahead of PostgreSQL's
    expect(t.pacing.pacedPerSecond()).toBe(0);
    t.tick(1_000, [503, 502, 502]);
    expect(t.pacing.pacedPerSecond()).toBe(0);
  });

  it('puts a drain running unpaced back to the floor when live work starts beside it', () => {
    const { pacing, tick, advance } = pacingAt();
    tick(100);
    tick(1_000);
    expect(pacing.pacedPerSecond()).toBe(0);
    pacing.beforeAttempt(4, 'ep_live'); // a live attempt, the first for a while
    expect(pacing.pacedPerSecond()).toBe(50);
    // Late starts are now booked 20 ms apart: two asking 1 ms apart, the second waits 19 ms.
    advance(10);
    expect(pacing.beforeAttempt(60_000, 'ep_late')).toBe(0);
    advance(1);
    expect(pacing.beforeAttempt(60_000, 'ep_late')).toBeCloseTo(19, 6);
  });

  it('holds a running drain at the floor when new work is announced, until quiet shows no live work came', () => {
    const { pacing, tick } = pacingAt();
    tick(100);
    tick(1_000);
    pacing.workArrived();
    expect(pacing.pacedPerSecond()).toBe(50);
    for (let i = 0; i < 7; i++) {
      tick(12); // 1.75 s with no live attempt yet: held
      pacing.workArrived(); // more announcements do not extend the hold
    }
    expect(pacing.pacedPerSecond()).toBe(50);
    for (let i = 0; i < 2; i++) tick(12);
    expect(pacing.pacedPerSecond()).toBe(0);
    // That hold saw no live attempt (the work went to another worker): announcements hold nothing…
    pacing.workArrived();
    expect(pacing.pacedPerSecond()).toBe(0);
    tick(12);
    // …until a live attempt is seen here again.
    for (let i = 0; i < 10; i++) tick(12);
    tick(12, [3]);
    for (let i = 0; i < 10; i++) tick(12);
    expect(pacing.pacedPerSecond()).toBe(0);
    pacing.workArrived();
    expect(pacing.pacedPerSecond()).toBe(50);
  });

  it('never books a late start more than maxWaitMs ahead, however many slots ask', () => {
    let now = 1_000_000;
    const pacing = new BacklogPacing({ targetMs: 3, minPerSecond: 50, maxWaitMs: 2_000, now: () => now });
    const waits = Array.from({ length: 1_000 }, () => pacing.beforeAttempt(60_000, 'ep_late'));
    expect(Math.max(...waits)).toBe(2_000);
    expect(waits.filter((w) => w === 2_000).length).toBe(1_000 - 100); // 100 fit in 2 s at 50/s
    // The schedule did not run ahead of the cap: 2 s later, a start waits for the floor's spacing only.
    now += 100;
    pacing.beforeAttempt(4, 'ep_live'); // live work keeps the pace on
    now += 1_900;
    expect(pacing.beforeAttempt(60_000, 'ep_late')).toBeLessThanOrEqual(20);
  });

  it("never paces an endpoint's late work while that endpoint has live work behind it", () => {
    const { pacing, advance } = pacingAt();
    for (let i = 0; i < 20; i++) {
      pacing.beforeAttempt(2, 'ep_live');
      advance(5);
    }
    pacing.beforeAttempt(60_000, 'ep_late'); // a drain starts beside the live endpoint: paced
    advance(1);
    expect(pacing.beforeAttempt(60_000, 'ep_late')).toBeCloseTo(19, 6);
    // The live endpoint's own late work (it fell behind) is not: its live work waits behind it.
    expect(pacing.beforeAttempt(60_000, 'ep_live')).toBe(0);
    expect(pacing.beforeAttempt(60_000, 'ep_live')).toBe(0);
    // Once it has had no live attempt for 2 s, it is a drain like any other.
    for (let i = 0; i < 9; i++) {
      pacing.beforeAttempt(2, 'ep_other');
      for (let k = 0; k < 30; k++) pacing.beforeAttempt(60_000, 'ep_late');
      advance(250);
    }
    expect(pacing.pacedPerSecond()).toBeGreaterThan(0);
    expect(pacing.beforeAttempt(60_000, 'ep_live')).toBeGreaterThan(0);
  });

  it('does nothing with a target of 0', () => {
    const { pacing, tick } = pacingAt(1_000_000, { targetMs: 0 });
    pacing.workArrived();
    tick(100, [2, 2]);
    expect(tick(1_000, [90, 90, 90]).every((w) => w === 0)).toBe(true);
    expect(pacing.pacedPerSecond()).toBe(0);
  });
});
