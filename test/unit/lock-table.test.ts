import { describe, expect, it } from 'vitest';
import { locksBesideEventDays, lockTableFit } from '../../src/domain/lock-table.js';
import { defaultRetention, eventDaysKept } from '../../src/domain/retention.js';

/** PostgreSQL's defaults: max_locks_per_transaction 64, max_connections 100, 3 for superusers. */
const defaults = { maxLocksPerTransaction: 64, maxConnections: 100, maxPreparedTransactions: 0, reservedConnections: 3 };

describe('the lock table the hot statements need', () => {
  it('counts the window, today and the days made ahead', () => {
    expect(eventDaysKept(defaultRetention)).toBe(39);
    expect(eventDaysKept({ ...defaultRetention, retentionDays: 365 })).toBe(374);
  });

  it("fits PostgreSQL's defaults at the default retention", () => {
    const fit = lockTableFit(eventDaysKept(defaultRetention), defaults);
    expect(fit.holds).toBe(6_400);
    expect(fit.needs).toBe(97 * (39 + locksBesideEventDays));
    expect(fit.needs).toBeLessThanOrEqual(fit.holds);
  });

  it('names the max_locks_per_transaction that fits 90 days kept', () => {
    const fit = lockTableFit(99, defaults);
    expect(fit.needs).toBeGreaterThan(fit.holds);
    expect(fit.maxLocksPerTransaction).toBe(Math.ceil((97 * (99 + locksBesideEventDays)) / 100));
    // At that setting it fits, and one less does not.
    expect(lockTableFit(99, { ...defaults, maxLocksPerTransaction: fit.maxLocksPerTransaction }).holds).toBeGreaterThanOrEqual(fit.needs);
    expect(lockTableFit(99, { ...defaults, maxLocksPerTransaction: fit.maxLocksPerTransaction - 1 }).holds).toBeLessThan(fit.needs);
  });

  it('gives prepared transactions their own slots and leaves reserved connections out of the busy ones', () => {
    const fit = lockTableFit(99, { maxLocksPerTransaction: 64, maxConnections: 200, maxPreparedTransactions: 10, reservedConnections: 5 });
    expect(fit.holds).toBe(64 * 210);
    expect(fit.needs).toBe(195 * (99 + locksBesideEventDays));
    expect(fit.maxLocksPerTransaction).toBe(Math.ceil(fit.needs / 210));
  });
});
