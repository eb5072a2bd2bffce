import { describe, expect, it } from 'vitest';
import { FairShare, yields } from '../../src/outbound/fair-share.js';

describe('yields: whether a holder gives a slot to a waiter', () => {
  it.each([
    // [waiter holds, holder holds, yields]
    [0, 1, true], // nothing running: always gets a slot, even the last one (the two then alternate)
    [0, 50, true],
    [1, 50, true],
    [48, 50, true],
    [49, 50, false], // after the exchange the waiter would hold more than the giver: stay even
    [50, 50, false],
    [3, 1, false],
  ])('waiter %i, holder %i → %s', (theirs, mine, expected) => {
    expect(yields(theirs, mine)).toBe(expected);
  });
});

describe('FairShare', () => {
  it('a slot hands off while nothing waits', () => {
    const share = new FairShare();
    share.enter('A', 'a1');
    expect(share.mayHandOff('A', 'a1')).toBe(true);
  });

  it("another tenant's waiting work with fewer slots stops the hand-off; the same tenant's only with clearly fewer", () => {
    const share = new FairShare();
    for (let i = 0; i < 10; i++) share.enter('A', 'a1');
    for (let i = 0; i < 9; i++) share.enter('A', 'a2');
    share.setWaiting([{ tenantId: 'A', endpointId: 'a2' }]);
    expect(share.mayHandOff('A', 'a1')).toBe(true); // 9 + 1 is not fewer than 10
    share.setWaiting([{ tenantId: 'B', endpointId: 'b1' }]);
    expect(share.mayHandOff('A', 'a1')).toBe(false);
    expect(share.hasWaiting()).toBe(true);
    share.setWaiting([]);
    expect(share.mayHandOff('A', 'a1')).toBe(true);
  });

  it('a waiting tenant with more slots does not take one', () => {
    const share = new FairShare();
    share.enter('B', 'b1');
    for (let i = 0; i < 5; i++) share.enter('A', 'a1');
    share.setWaiting([{ tenantId: 'A', endpointId: 'a1' }]);
    expect(share.mayHandOff('B', 'b1')).toBe(true);
  });

  it('leaving a slot gives its count back, once', () => {
    const share = new FairShare();
    const leave = share.enter('A', 'a1');
    share.enter('A', 'a1');
    leave();
    leave();
    expect(share.slotsOf('A')).toBe(1);
  });

  it('work queued while full waits until a slot here starts it, or its wait runs out', () => {
    let now = 0;
    const share = new FairShare(2_000, () => now);
    share.enter('A', 'a1');
    share.enter('A', 'a1');
    share.queuedWhileFull([{ id: 'dlv_1', tenantId: 'B', endpointId: 'b1' }, { id: 'dlv_2', tenantId: 'C', endpointId: 'c1' }]);
    expect(share.mayHandOff('A', 'a1')).toBe(false);
    share.enter('B', 'b1', 'dlv_1');
    expect(share.mayHandOff('A', 'a1')).toBe(false); // C still waits
    now = 2_000;
    expect(share.mayHandOff('A', 'a1')).toBe(true);
    expect(share.hasWaiting()).toBe(false);
  });
});
