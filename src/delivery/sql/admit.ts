/**
 * admit: pending → queued (for Redis) or pending → in_flight (for a slot of this process).
 *
 * The round is the SQL function `admit_due_v4` (db/functions/admit_due_v4.sql, whose header says what goes
 * in and out and which locks it takes); how much each endpoint may take is `next_due`, the rule the
 * slot hand-offs use too. This module checks the limits and shapes the rows.
 */
import type { Knex } from 'knex';
import { idOfUuid } from '../../domain/ids.js';
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
  tenant_id: string;
  endpoint_id: string;
  event_id: string;
  attempt_count: number;
}

export interface AdmissionRound {
  /** Queued for Redis: one BullMQ job each. */
  queued: AdmittedDelivery[];
  /** Already in flight for this process. */
  claimed: ClaimedDelivery[];
  /** Endpoints with due work and room that another process was admitting; worth another round soon. */
  skipped: number;
  /**
   * Endpoints with due work and room that got no slot of this process (everything runs locally and
   * its slots were taken): the work that running slots yield to (src/outbound/fair-share.ts).
   */
  waiting: WaitingWork[];
}

export interface WaitingWork {
  tenantId: string;
  endpointId: string;
}

export const admitStatement = statement(
  'admit_due',
  'SELECT * FROM admit_due_v4(:threshold, :batch, :queuedLeaseSeconds, :localCount, :inFlightLeaseMs, :allLocal)',
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
    queued: rows.filter((r) => !r.local).map((r) => ({ id: idOfUuid('delivery', r.id), tenant_id: idOfUuid('tenant', r.tenant_id), endpoint_id: idOfUuid('endpoint', r.ep_id), event_id: idOfUuid('event', r.event_id), attempt_count: r.attempt_count })),
    claimed: rows.filter((r) => r.local).map(rowToClaimed),
    skipped: head?.skipped ?? 0,
    waiting: all.filter((r) => r.id === null && r.local === false).map((r) => ({ tenantId: idOfUuid('tenant', r.tenant_id), endpointId: idOfUuid('endpoint', r.ep_id) })),
  };
}
