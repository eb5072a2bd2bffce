import { describe, expect, it } from 'vitest';
import { lockTableFit, lockTableFitFor } from '../../src/domain/lock-table.js';
import { defaultRetention, eventDaysKept } from '../../src/domain/retention.js';

/** PostgreSQL's defaults: max_locks_per_transaction 64, max_connections 100, 3 for superusers. */
const defaults = { maxLocksPerTransaction: 64, maxConnections: 100, maxPreparedTransactions: 0, reservedConnections: 3 };

// The numbers docs/operations/postgres.md, the compose file and the Kubernetes README quote.
describe('the lock table the hot statements need', () => {
  it('counts the longer retention window, today and the days made ahead', () => {
    expect(eventDaysKept(defaultRetention)).toBe(39);
    expect(eventDaysKept({ ...defaultRetention, retentionDays: 365 })).toBe(374);
    expect(eventDaysKept({ ...defaultRetention, retentionDays: 7, deadLetterRetentionDays: 90 })).toBe(99);
  });

  it("fits PostgreSQL's defaults at the default retention, with 95 locks to spare", () => {
    const fit = lockTableFit(39, defaults);
    expect(fit).toEqual({ holds: 6_400, needs: 6_305, maxLocksPerTransaction: 64 });
  });

  it('names 122 for 90 days, 209 for 180 and 388 for 365, at 100 connections', () => {
    for (const [days, locks] of [[90, 122], [180, 209], [365, 388]] as const) {
      const fit = lockTableFitFor(10, { ...defaultRetention, retentionDays: days }, defaults);
      expect(fit.needs).toBeGreaterThan(fit.holds);
      expect(fit.maxLocksPerTransaction).toBe(locks);
      expect(lockTableFit(fit.eventDays, { ...defaults, maxLocksPerTransaction: locks }).holds).toBeGreaterThanOrEqual(fit.needs);
      expect(lockTableFit(fit.eventDays, { ...defaults, maxLocksPerTransaction: locks - 1 }).holds).toBeLessThan(fit.needs);
    }
  });

  it('holds up to 94 days with 128 at 200 connections, as the compose file sets it', () => {
    const compose = { ...defaults, maxLocksPerTransaction: 128, maxConnections: 200 };
    const fits = (days: number) => {
      const fit = lockTableFitFor(10, { ...defaultRetention, retentionDays: days }, compose);
      return fit.needs <= fit.holds;
    };
    expect(fits(94)).toBe(true);
    expect(fits(95)).toBe(false);
  });

  it('takes the days a database holds when they are more than its windows keep', () => {
    expect(lockTableFitFor(500, defaultRetention, defaults).eventDays).toBe(500);
    expect(lockTableFitFor(12, defaultRetention, defaults).eventDays).toBe(39);
  });

  it('gives prepared transactions their own room and leaves reserved connections out of the busy ones', () => {
    expect(lockTableFit(99, { maxLocksPerTransaction: 64, maxConnections: 200, maxPreparedTransactions: 10, reservedConnections: 5 })).toEqual({
      holds: 64 * 210,
      needs: 195 * 125,
      maxLocksPerTransaction: Math.ceil((195 * 125) / 210),
    });
  });
});
