import { describe, expect, it } from 'vitest';
import { leasedBudget } from '../../src/api/rate-limit.js';

/** A shared limiter as the Redis one behaves: a budget per window, rejecting once it is spent. */
function windowLimiter(budget: number, msBeforeNext: number) {
  const calls: number[] = [];
  let used = 0;
  const consume = async (_tenant: string, points: number) => {
    calls.push(points);
    used += points;
    if (used > budget) throw Object.assign(new Error('budget spent'), { msBeforeNext });
    return { msBeforeNext };
  };
  return { consume, calls };
}

describe('leased per-tenant budget', () => {
  it('a lease granted in the last moment of its window serves the request that took it: one lease, not the whole budget', async () => {
    const limiter = windowLimiter(1_000, 0);
    const spend = leasedBudget(limiter.consume, 1_000);
    await expect(spend('ten_a')).resolves.toBeUndefined();
    expect(limiter.calls).toEqual([50]);
  });

  it('requests that arrive together wait for one lease between them, and only as many leases as they need', async () => {
    const limiter = windowLimiter(1_000, 1_000);
    const spend = leasedBudget(limiter.consume, 1_000);
    await Promise.all(Array.from({ length: 120 }, () => spend('ten_a')));
    expect(limiter.calls).toEqual([50, 50, 50]);
  });

  it('spends a live lease locally, takes a new one when it is used up, and passes the rejection on once the window is spent', async () => {
    const limiter = windowLimiter(100, 1_000);
    const spend = leasedBudget(limiter.consume, 1_000);
    for (let i = 0; i < 100; i++) await spend('ten_a');
    expect(limiter.calls).toEqual([50, 50]);
    await expect(spend('ten_a')).rejects.toThrow('budget spent');
  });

  it('keeps each tenant to its own leases', async () => {
    const limiter = windowLimiter(1_000, 1_000);
    const spend = leasedBudget(limiter.consume, 20);
    await spend('ten_a');
    await spend('ten_b');
    await spend('ten_a');
    expect(limiter.calls).toEqual([1, 1, 1]);
  });
});
