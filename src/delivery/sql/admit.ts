/**
 * admit: pending → queued (for Redis) or pending → in_flight (for a slot of this process)
 *
 * Inputs:  limits (lease lengths, circuit threshold, per-endpoint batch) and `local`, how many
 *          admitted deliveries this process can start at once without Redis.
 * Outputs: the admitted deliveries; up to `local` of them (spread round-robin over endpoints, at
 *          most half of an endpoint's concurrency unless Redis is failing) are already `in_flight`
 *          with their attempt counted and come with everything an attempt needs (`ClaimedDelivery`);
 *          the rest are `queued` and need a BullMQ job each (none while Redis is failing).
 *          `skipped`: endpoints another process was admitting at that moment.
 *
 * Cost follows endpoints with pending work, not endpoints that exist: candidates come from a skip
 * scan over `delivery_queue_due` (one index descent per endpoint that has a pending delivery), so
 * 100,000 endpoints with nothing pending cost nothing. Rows are found in `delivery_queue`, the
 * mirror of unfinished deliveries (migration 20261201000024), and locked and checked on `deliveries`.
 *
 * No platform-wide lock. Each endpoint is admitted under its own transaction-scoped advisory lock,
 * taken with `pg_try_advisory_xact_lock`: two processes admit different endpoints in parallel, and
 * an endpoint that another process is admitting right now is skipped (the caller runs another round
 * shortly, so what that process's snapshot could not see yet is not left waiting for a timer).
 * Capacity is then counted by a second statement whose snapshot is taken after the locks are held,
 * so it sees everything the previous admitter of each endpoint committed: `maxConcurrency`, rate
 * tokens and the half-open circuit's single probe stay exact across processes. Nothing else raises
 * an endpoint's busy count (a claim keeps it, a slot hand-off swaps one busy delivery for another,
 * a result lowers it), so admission is the only place that needs the lock.
 *
 * The round does not wait for its commit's WAL flush: admitted rows promise nobody anything, and
 * lost in a crash of PostgreSQL they are simply pending again.
 */
import type { Knex } from 'knex';
import { run, statement } from '../../infra/sql.js';
import { rowToClaimed, type ClaimedDelivery } from './claimed.js';

export interface AdmissionLimits {
  /** Lease on `queued`: how long Redis may hold a job before the sweeper assumes it was lost. */
  queuedLeaseSeconds: number;
  circuitFailureThreshold: number;
  /** Upper bound of deliveries one endpoint gets per admission round, for fairness between endpoints. */
  perEndpointBatch: number;
}

export interface LocalClaims {
  /** How many admitted deliveries may go straight to `in_flight` for this process's own slots. */
  count: number;
  /** Lease of such an in-flight attempt, as a claim would give it. */
  inFlightLeaseMs: number;
  /**
   * `share` (Redis is up): an endpoint's work goes to local slots only up to half its concurrency,
   * the rest to Redis, so other worker processes take part in a backlog. `all` (Redis is failing):
   * everything runs locally and nothing is queued.
   */
  mode?: 'share' | 'all';
}

export interface AdmittedDelivery {
  id: string;
  endpoint_id: string;
  attempt_count: number;
}

export interface AdmissionRound {
  /** Queued for Redis: one BullMQ job each. */
  queued: AdmittedDelivery[];
  /** Already in flight for this process. */
  claimed: ClaimedDelivery[];
  /** Endpoints with due work that another process was admitting; worth another round soon. */
  skipped: number;
}

/**
 * The round itself is the SQL function `admit_due` (db/functions/admit_due.sql):
 * one round trip, plans cached per connection. Its first statement finds the candidates and
 * try-locks each (`pg_try_advisory_xact_lock(727002, hashtext(endpoint_id))`); its second admits for
 * the locked ones in a snapshot taken after the locks are held. Its head-of-line condition is
 * `headOfLine` in ./head-of-line.ts. Every row carries `skipped`; a row without an id only says it.
 */
const admitStatement = statement(
  'admit_due',
  'SELECT * FROM admit_due(:threshold, :batch, :queuedLeaseSeconds, :localCount, :inFlightLeaseMs, :allLocal)',
);

function nonNegative(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`admission: ${name} must be a non-negative integer, got ${value}`);
  return value;
}

/**
 * Moves due `pending` deliveries on, per endpoint no more than it has room for: free concurrency
 * slots, rate-limit tokens, and a single probe while its circuit is half-open. Endpoints with an
 * open circuit or no room get nothing and cost nothing in Redis: their work waits here.
 */
export async function admitDue(db: Knex, limits: AdmissionLimits, local: LocalClaims = { count: 0, inFlightLeaseMs: 0 }): Promise<AdmissionRound> {
  const all = await run(db, admitStatement, {
    threshold: nonNegative('circuitFailureThreshold', limits.circuitFailureThreshold),
    batch: nonNegative('perEndpointBatch', limits.perEndpointBatch),
    queuedLeaseSeconds: nonNegative('queuedLeaseSeconds', limits.queuedLeaseSeconds),
    localCount: nonNegative('local.count', local.count),
    inFlightLeaseMs: nonNegative('local.inFlightLeaseMs', Math.round(local.inFlightLeaseMs)),
    allLocal: local.mode === 'all',
  });
  const rows = all.filter((r) => r.id !== null);
  const head = all[0] as { skipped: number } | undefined;
  return {
    queued: rows.filter((r) => !r.local).map((r) => ({ id: r.id, endpoint_id: r.ep_id, attempt_count: r.attempt_count })),
    claimed: rows.filter((r) => r.local).map(rowToClaimed),
    skipped: head?.skipped ?? 0,
  };
}
