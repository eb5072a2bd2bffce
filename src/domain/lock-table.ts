/**
 * Whether PostgreSQL's lock table holds the relation locks of every connection that can be busy with
 * the platform at once. Pure: the server's settings and the partitions of `events` come from the caller.
 *
 * The hot SQL functions run plans cached for any value, and PostgreSQL 15 locks every partition of a
 * table such a plan reads before it prunes them. So a connection recording results holds a lock on
 * each partition of `events` kept (a day's, or a week's past a few weeks kept: dayTablesPeriod), and
 * on the tables and indexes around them. The lock table has room for
 * max_locks_per_transaction × (max_connections + max_prepared_transactions) locks, shared by all
 * connections; past that, statements fail with "out of shared memory" (docs/operations/postgres.md).
 */

import { eventPartitionsKept, type RetentionPolicy } from './retention.js';

/**
 * The heaviest hot statement's relation locks beside the partitions of `events`, running a cached
 * plan: record_successes_v4 with its hand-off (docs/performance.md, "The lock table at long
 * retention"). Planning it again, as every connection does when a partition is created, takes
 * several times as many for a moment: the lock table's room beyond the product it counts covers that
 * (docs/operations/postgres.md).
 */
export const locksBesideEventPartitions = 26;

export interface LockTableSettings {
  maxLocksPerTransaction: number;
  maxConnections: number;
  maxPreparedTransactions: number;
  /** Connections kept for superusers (and, from PostgreSQL 16, for reserved roles). */
  reservedConnections: number;
}

export interface LockTableFit {
  /** Locks the table has room for. */
  holds: number;
  /** Locks every connection but the reserved ones would hold, each in the heaviest hot statement. */
  needs: number;
  /** The smallest max_locks_per_transaction at which it fits. */
  maxLocksPerTransaction: number;
}

/**
 * The fit for the partitions a database will hold: those its retention windows keep, or those it
 * holds already if more (days made before it was cut by week stay until retention drops them).
 */
export function lockTableFitFor(partitionsHeld: number, policy: RetentionPolicy, settings: LockTableSettings): LockTableFit & { eventPartitions: number } {
  const eventPartitions = Math.max(partitionsHeld, eventPartitionsKept(policy));
  return { eventPartitions, ...lockTableFit(eventPartitions, settings) };
}

export function lockTableFit(eventPartitions: number, settings: LockTableSettings): LockTableFit {
  const slots = settings.maxConnections + settings.maxPreparedTransactions;
  const busy = Math.max(1, settings.maxConnections - settings.reservedConnections);
  const needs = busy * (eventPartitions + locksBesideEventPartitions);
  return { holds: settings.maxLocksPerTransaction * slots, needs, maxLocksPerTransaction: Math.ceil(needs / slots) };
}
