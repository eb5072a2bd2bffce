import { describe, expect, it } from 'vitest';
import { RecentMap, RecentSet } from '../../src/domain/recent.js';

/** Deterministic pseudo-random integers in [0, n). */
function random(seed: number) {
  let state = seed;
  return (n: number) => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state % n;
  };
}

/** What a bounded recent-keys memory must hold: the `capacity` keys touched last, newest at the end. */
class Model<V> {
  readonly entries: Array<[string, V]> = [];

  constructor(private readonly capacity: number) {}

  set(key: string, value: V): void {
    const at = this.entries.findIndex(([k]) => k === key);
    if (at >= 0) this.entries.splice(at, 1);
    if (this.entries.length >= this.capacity) this.entries.shift();
    this.entries.push([key, value]);
  }

  get(key: string): V | undefined {
    return this.entries.find(([k]) => k === key)?.[1];
  }

  delete(key: string): void {
    const at = this.entries.findIndex(([k]) => k === key);
    if (at >= 0) this.entries.splice(at, 1);
  }
}

const universe = Array.from({ length: 300 }, (_, i) => `key ${i}`);

describe('RecentSet', () => {
  it('forgets the key added longest ago, and a key added again counts as new, over 20,000 adds', () => {
    const next = random(7);
    const set = new RecentSet(100);
    const model = new Model<true>(100);
    for (let op = 0; op < 20_000; op++) {
      // Most adds repeat a key of the last few hundred, so keys are re-added while others are evicted.
      const key = universe[next(universe.length)]!;
      set.add(key);
      model.set(key, true);
      if (op % 97 === 0 || op > 19_900) {
        for (const k of universe) expect(set.has(k), `${k} after ${op + 1} adds`).toBe(model.get(k) === true);
      }
      expect(set.size).toBe(model.entries.length);
    }
  });

  it('holds only the newest key at a capacity of 1 or 0: each add forgets the one before', () => {
    const one = new RecentSet(1);
    const none = new RecentSet(0);
    for (let i = 0; i < 50; i++) {
      one.add(`k${i}`);
      none.add(`k${i}`);
      expect([one.has(`k${i}`), one.size]).toEqual([true, 1]);
      if (i > 0) expect(one.has(`k${i - 1}`)).toBe(false);
      // A capacity of 0 forgets the previous key as the next one comes in.
      expect(none.size).toBe(1);
    }
  });

  it('keeps only the newest keys while every add is new', () => {
    const set = new RecentSet(3);
    for (let i = 0; i < 10; i++) set.add(`k${i}`);
    expect(['k6', 'k7', 'k8', 'k9'].map((k) => set.has(k))).toEqual([false, true, true, true]);
    set.add('k7');
    set.add('k10');
    expect(['k7', 'k8', 'k9', 'k10'].map((k) => set.has(k))).toEqual([true, false, true, true]);
  });
});

describe('RecentMap', () => {
  it('answers the value last set for each of the keys set last, across deletes and clears, over 20,000 operations', () => {
    const next = random(11);
    const map = new RecentMap<number>(50);
    let model = new Model<number>(50);
    for (let op = 0; op < 20_000; op++) {
      if (op % 4_999 === 4_998) {
        map.clear();
        model = new Model<number>(50);
        continue;
      }
      const key = universe[next(120)]!;
      if (op % 13 === 0) {
        map.delete(key);
        model.delete(key);
        continue;
      }
      map.set(key, op);
      model.set(key, op);
      if (op % 89 === 0 || op > 19_900) {
        for (const k of universe.slice(0, 120)) expect(map.get(k), `${k} after ${op + 1} sets`).toBe(model.get(k));
      }
    }
  });
});
