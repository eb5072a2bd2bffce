import { describe, expect, it } from 'vitest';
import { lockTableFit, lockTableFitFor } from '../../src/domain/lock-table.js';
import { dayTablesPeriod, defaultRetention, eventPartitionsKept } from '../../src/domain/retention.js';

/** PostgreSQL's defaults: max_locks_per_transaction 64, max_connections 100, 3 for superusers. */
const defaults = { maxLocksPerTransaction: 64, maxConnections: 100, maxPreparedTransactions: 0, reservedConnections: 3 };
const keeping = (retentionDays: number, deadLetterRetentionDays = 30) => ({ ...defaultRetention, retentionDays, deadLetterRetentionDays });

// The numbers docs/operations/postgres.md, the compose file and the Kubernetes README quote.
describe('the partitions of events a database keeps', () => {
  it('are days up to 55 days kept, and weeks from 56', () => {
    expect(dayTablesPeriod(defaultRetention)).toBe('day');
    expect(dayTablesPeriod(keeping(55))).toBe('day');
    expect(dayTablesPeriod(keeping(56))).toBe('week');
    expect(dayTablesPeriod(keeping(7, 56))).toBe('week');
  });

  it('count the longer window, today and the days made ahead, by day or by the weeks they span', () => {
    expect(eventPartitionsKept(defaultRetention)).toBe(39);
    expect(eventPartitionsKept(keeping(55))).toBe(64);
    // 65 days span 10 weeks, 11 when they do not begin on a Monday.
    expect(eventPartitionsKept(keeping(56))).toBe(11);
    // 374 days: 54 weeks, and one more.
    expect(eventPartitionsKept(keeping(365))).toBe(55);
    expect(eventPartitionsKept(keeping(7, 90))).toBe(16);
  });
});

describe('the lock table the hot statements need', () => {
  it("fits PostgreSQL's defaults at the default retention, with 95 locks to spare", () => {
    const fit = lockTableFit(39, defaults);
    expect(fit).toEqual({ holds: 6_400, needs: 6_305, maxLocksPerTransaction: 64 });
  });

  it('names 78 for 45 days and 79 for 365 at 100 connections; the defaults hold 30 days by day, and 56 to 257 by week', () => {
    for (const [days, locks] of [[45, 78], [365, 79]] as const) {
      const fit = lockTableFitFor(10, keeping(days), defaults);
      expect(fit.needs).toBeGreaterThan(fit.holds);
      expect(fit.maxLocksPerTransaction).toBe(locks);
      expect(lockTableFit(fit.eventPartitions, { ...defaults, maxLocksPerTransaction: locks }).holds).toBeGreaterThanOrEqual(fit.needs);
      expect(lockTableFit(fit.eventPartitions, { ...defaults, maxLocksPerTransaction: locks - 1 }).holds).toBeLessThan(fit.needs);
    }
    const fits = (days: number) => {
      const fit = lockTableFitFor(10, keeping(days), defaults);
      return fit.needs <= fit.holds;
    };
    expect([30, 31, 55, 56, 90, 257, 258].map(fits)).toEqual([true, false, false, true, true, true, false]);
  });

  it('holds up to 705 days with 128 at 200 connections, as the compose file sets it', () => {
    const compose = { ...defaults, maxLocksPerTransaction: 128, maxConnections: 200 };
    const fits = (days: number) => {
      const fit = lockTableFitFor(10, keeping(days), compose);
      return fit.needs <= fit.holds;
    };
    expect(fits(30)).toBe(true);
    expect(fits(55)).toBe(true);
    expect(fits(705)).toBe(true);
    expect(fits(706)).toBe(false);
  });

  it('takes the partitions a database holds when they are more than its windows keep', () => {
    // Days made before the tables were cut by week stay until retention drops them.
    expect(lockTableFitFor(374, keeping(365), defaults).eventPartitions).toBe(374);
    expect(lockTableFitFor(12, defaultRetention, defaults).eventPartitions).toBe(39);
  });

  it('gives prepared transactions their own room and leaves reserved connections out of the busy ones', () => {
    expect(lockTableFit(99, { maxLocksPerTransaction: 64, maxConnections: 200, maxPreparedTransactions: 10, reservedConnections: 5 })).toEqual({
      holds: 64 * 210,
      needs: 195 * 125,
      maxLocksPerTransaction: Math.ceil((195 * 125) / 210),
    });
  });
});
