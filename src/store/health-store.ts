import type { Knex } from 'knex';
import type { LockTableSettings } from '../domain/lock-table.js';

/** Resolves once PostgreSQL has answered a trivial query through the pool: what readiness asks. */
export async function pingDatabase(platformDb: Knex): Promise<void> {
  await platformDb.raw('SELECT 1');
}

/** The server's lock table settings (domain/lock-table.ts), and the partitions of `events` the database holds. */
export async function lockTableState(platformDb: Knex): Promise<LockTableSettings & { eventPartitions: number }> {
  const { rows } = await platformDb.raw<{ rows: Array<{ max_locks: number; max_connections: number; max_prepared: number; reserved: number; event_partitions: number }> }>(`
    SELECT current_setting('max_locks_per_transaction')::int AS max_locks,
           current_setting('max_connections')::int AS max_connections,
           current_setting('max_prepared_transactions')::int AS max_prepared,
           -- reserved_connections is PostgreSQL 16's; on 15 it reads as NULL.
           current_setting('superuser_reserved_connections')::int
             + coalesce(current_setting('reserved_connections', true)::int, 0) AS reserved,
           (SELECT count(*) FROM partition_bounds WHERE parent = 'events')::int AS event_partitions`);
  const s = rows[0]!;
  return {
    maxLocksPerTransaction: s.max_locks,
    maxConnections: s.max_connections,
    maxPreparedTransactions: s.max_prepared,
    reservedConnections: s.reserved,
    eventPartitions: s.event_partitions,
  };
}
