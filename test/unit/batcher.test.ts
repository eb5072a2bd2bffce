import { describe, expect, it } from 'vitest';
import { Batcher } from '../../src/infra/batcher.js';

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('Batcher', () => {
  it('sends a lone item at once, and groups what arrives while the statement is busy', async () => {
    const batches: number[][] = [];
    const releases: Array<() => void> = [];
    const b = new Batcher<number, number>({
      maxBatch: 3,
      maxInFlight: 1,
      run: (items) => {
        batches.push(items);
        return new Promise((resolve) => releases.push(() => resolve(items.map((i) => i * 10))));
      },
    });
    const first = b.submit(1);
    expect(batches).toEqual([[1]]); // no timer: an idle batcher runs at once
    const rest = [2, 3, 4, 5].map((n) => b.submit(n));
    expect(batches).toHaveLength(1);
    releases[0]!();
    expect(await first).toBe(10);
    await tick();
    expect(batches).toEqual([[1], [2, 3, 4]]); // bounded by maxBatch
    releases[1]!();
    await tick();
    expect(batches).toEqual([[1], [2, 3, 4], [5]]);
    releases[2]!();
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50]);
  });

  it('with overlapFrom, a second statement starts only once that many items wait', async () => {
    const batches: number[][] = [];
    const releases: Array<() => void> = [];
    const b = new Batcher<number, number>({
      maxBatch: 10,
      maxInFlight: 2,
      overlapFrom: 3,
      run: (items) => {
        batches.push(items);
        return new Promise((resolve) => releases.push(() => resolve(items)));
      },
    });
    const all = [b.submit(1)];
    expect(batches).toEqual([[1]]);
    all.push(b.submit(2), b.submit(3));
    expect(batches).toEqual([[1]]); // two wait: not enough to overlap, they wait for the first
    all.push(b.submit(4));
    expect(batches).toEqual([[1], [2, 3, 4]]); // three wait: a second statement starts beside the first
    all.push(b.submit(5));
    expect(batches).toHaveLength(2); // both busy
    releases[0]!();
    await tick();
    expect(batches).toHaveLength(2); // one item waits while [2, 3, 4] runs: too few to overlap
    releases[1]!();
    await tick();
    expect(batches).toEqual([[1], [2, 3, 4], [5]]); // nothing runs: what waits goes at once
    releases[2]!();
    expect(await Promise.all(all)).toEqual([1, 2, 3, 4, 5]);
  });

  it('on a failure that may be one item’s, runs each alone so only that item fails', async () => {
    const b = new Batcher<number, number>({
      maxBatch: 10,
      maxInFlight: 1,
      retryAlone: () => true,
      run: async (items) => {
        if (items.includes(3)) throw new Error(`bad ${items.join(',')}`);
        return items;
      },
    });
    const blocker = b.submit(0);
    const results = await Promise.allSettled([1, 2, 3, 4].map((n) => b.submit(n)));
    await blocker;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((results[2] as PromiseRejectedResult).reason.message).toBe('bad 3');
  });

  it('when the failure is the database’s, fails the batch and everything waiting behind it at once', async () => {
    let runs = 0;
    const b = new Batcher<number, number>({
      maxBatch: 10,
      maxInFlight: 1,
      retryAlone: () => false,
      run: async () => {
        runs++;
        await tick();
        throw new Error('down');
      },
    });
    const all = [1, 2, 3].map((n) => b.submit(n));
    const results = await Promise.allSettled(all);
    expect(results.every((r) => r.status === 'rejected')).toBe(true);
    expect(runs).toBe(1); // [1] failed; [2, 3] were not sent to wait for the same timeout again
  });

  it('settles every item when a run throws before returning a promise, or retryAlone throws', async () => {
    const b = new Batcher<number, number>({
      maxBatch: 10,
      maxInFlight: 1,
      retryAlone: () => true,
      // Not async: a bad item throws synchronously, as a statement builder can.
      run: (items) => {
        if (items.includes(3)) throw new Error(`bad ${items.join(',')}`);
        return Promise.resolve(items);
      },
    });
    const blocker = b.submit(0);
    const results = await Promise.allSettled([1, 2, 3, 4].map((n) => b.submit(n)));
    await blocker;
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);

    const broken = new Batcher<number, number>({
      maxBatch: 10,
      maxInFlight: 1,
      retryAlone: () => {
        throw new Error('classifier failed');
      },
      run: async () => {
        await tick();
        throw new Error('down');
      },
    });
    const settled = await Promise.allSettled([1, 2, 3].map((n) => broken.submit(n)));
    expect(settled.map((r) => (r.status === 'rejected' ? (r.reason as Error).message : 'fulfilled'))).toEqual(['down', 'down', 'down']);
  });
});
