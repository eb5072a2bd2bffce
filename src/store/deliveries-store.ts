import type { Knex } from 'knex';
import { isUnfinished, type AttemptOutcome, type Trigger, type WaitReason } from '../domain/delivery-status.js';
import { idOfUuid, uuidOfId } from '../domain/ids.js';
import { whereEventType } from './events-store.js';
import type { TenantScope } from './tenant-scope.js';

/** A delivery as read: its id, its event's and its endpoint's are the uuids stored (rowToDelivery names them). */
export interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  attempt_count: number;
  next_attempt_at: Date | null;
  dead_reason: string | null;
  last_error: string | null;
  last_status_code: number | null;
  succeeded_at: Date | null;
  created_at: Date;
  updated_at: Date;
  event_type?: string;
  /** Only from listDeliveriesQuery (see there). */
  waiting_for?: WaitReason | null;
}

export interface AttemptRow {
  id: string;
  delivery_id: string;
  attempt_number: number;
  trigger: Trigger;
  started_at: Date;
  duration_ms: number;
  status_code: number | null;
  outcome: AttemptOutcome;
  error_class: string | null;
  error_message: string | null;
  response_excerpt: string | null;
  next_attempt_at: Date | null;
}

/** The columns of a delivery as the API shows it; the query needs `withDeliveryState`. */
export const deliveryColumns = [
  ...['id', 'event_id', 'endpoint_id', 'next_attempt_at', 'dead_reason', 'last_error', 'last_status_code', 'succeeded_at', 'created_at', 'updated_at']
    .map((c) => `deliveries.${c}`),
  'state.status',
  'state.attempt_count',
];

/**
 * Joins each delivery's status and attempt count as they are now (db/functions/delivery_state.sql):
 * a slot's claim is kept in the queue row only, so `deliveries.status` says `pending` while the
 * delivery is in flight.
 */
export function withDeliveryState<Q extends Knex.QueryBuilder>(q: Q): Q {
  return q.joinRaw('CROSS JOIN LATERAL delivery_state(deliveries.id, deliveries.status, deliveries.attempt_count) AS state') as Q;
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

export function rowToDeliverySummary(r: DeliveryRow) {
  return {
    id: idOfUuid('delivery', r.id),
    endpointId: idOfUuid('endpoint', r.endpoint_id),
    status: r.status,
    attemptCount: r.attempt_count,
    // Only a delivery still waiting has a next attempt.
    nextAttemptAt: r.status === 'pending' || r.status === 'queued' ? iso(r.next_attempt_at) : null,
    deadReason: r.dead_reason,
    lastError: r.last_error,
    lastStatusCode: r.last_status_code,
  };
}

export function rowToDelivery(r: DeliveryRow, attempts?: AttemptRow[]) {
  return {
    ...rowToDeliverySummary(r),
    eventId: idOfUuid('event', r.event_id),
    ...(r.event_type ? { eventType: r.event_type } : {}),
    createdAt: r.created_at.toISOString(),
    updatedAt: r.updated_at.toISOString(),
    succeededAt: iso(r.succeeded_at),
    ...(r.waiting_for !== undefined ? { waitingFor: r.waiting_for } : {}),
    ...(attempts ? { attempts: attempts.map(rowToAttempt) } : {}),
  };
}

export function rowToAttempt(a: AttemptRow) {
  return {
    id: idOfUuid('attempt', a.id),
    attemptNumber: a.attempt_number,
    trigger: a.trigger,
    startedAt: a.started_at.toISOString(),
    durationMs: a.duration_ms,
    statusCode: a.status_code,
    outcome: a.outcome,
    errorClass: a.error_class,
    error: a.error_message,
    responseExcerpt: a.response_excerpt,
    nextAttemptAt: iso(a.next_attempt_at),
  };
}

export interface DeliveryFilter {
  status?: string;
  endpointId?: string;
  eventId?: string;
  eventType?: string;
  reason?: string;
  since?: Date;
  until?: Date;
}

/** Deliveries joined to their events and narrowed by the filter; shared by search and bulk replay. */
export function filteredDeliveries(scope: TenantScope, f: DeliveryFilter) {
  const q = withDeliveryState(scope.from('deliveries').join('events', 'events.id', 'deliveries.event_id'));
  if (f.status) q.where('state.status', f.status);
  // The indexes that find these statuses quickly: deliveries_dead, and the queue's tenant index.
  if (f.status === 'dead') q.where('deliveries.status', 'dead').whereNotNull('deliveries.dead_reason');
  if (f.status === 'succeeded') q.where('deliveries.status', 'succeeded');
  if (isUnfinished(f.status)) {
    q.whereIn('deliveries.id', scope.from('delivery_queue').where('delivery_queue.status', f.status).select('delivery_queue.delivery_id'));
  }
  if (f.endpointId) {
    // A malformed id names no endpoint: the filter then matches nothing, as any unknown id does.
    const key = uuidOfId('endpoint', f.endpointId);
    if (key === null) q.whereRaw('false');
    else q.where('deliveries.endpoint_id', key);
  }
  if (f.eventId) {
    const key = uuidOfId('event', f.eventId);
    if (key === null) q.whereRaw('false');
    else q.where('deliveries.event_id', key);
  }
  if (f.eventType) whereEventType(q, 'events.type', f.eventType);
  if (f.reason) q.where('deliveries.dead_reason', f.reason);
  if (f.since) q.where('deliveries.created_at', '>=', f.since);
  if (f.until) q.where('deliveries.created_at', '<', f.until);
  return q;
}

/**
 * Why a pending delivery is not being sent, judged by the database clock: its endpoint's circuit is
 * open and the delivery is due before it closes (`circuit`, see src/domain/circuit.ts); a retry's
 * delay has not passed (`retry_delay`); it starts later, as a paced replay does (`scheduled`); else
 * null, also when nothing but a free slot is missing. Rate limits and per-message ordering holds
 * are not reported: they are judged by admission, not stored.
 */
const waitingFor = `CASE WHEN state.status <> 'pending' THEN NULL
       WHEN wait_ep.circuit_open_until > now() AND deliveries.next_attempt_at <= wait_ep.circuit_open_until THEN 'circuit'
       WHEN deliveries.next_attempt_at > now() THEN CASE WHEN deliveries.next_trigger = 'retry' THEN 'retry_delay' ELSE 'scheduled' END
  END AS waiting_for`;

export function listDeliveriesQuery(scope: TenantScope, f: DeliveryFilter) {
  return filteredDeliveries(scope, f)
    .leftJoin('endpoints as wait_ep', 'wait_ep.id', 'deliveries.endpoint_id')
    .select([...deliveryColumns, 'events.type as event_type', scope.expression(waitingFor)]);
}

/** One delivery as listDeliveriesQuery shows it, or undefined; a malformed id names none. */
export async function findDelivery(scope: TenantScope, id: string): Promise<DeliveryRow | undefined> {
  const key = uuidOfId('delivery', id);
  return key === null ? undefined : listDeliveriesQuery(scope, {}).where('deliveries.id', key).first();
}

/** The attempts of these deliveries, by the rows' own ids (DeliveryRow.id, as stored). */
export async function attemptsFor(scope: TenantScope, deliveryIds: string[]): Promise<Map<string, AttemptRow[]>> {
  const byDelivery = new Map<string, AttemptRow[]>();
  if (deliveryIds.length === 0) return byDelivery;
  // Through their deliveries, which carry the tenant and a portal session's narrowing, and may
  // hold a first try folded into them (db/functions/delivery_attempts.sql).
  const rows: AttemptRow[] = await scope
    .from('deliveries')
    .whereIn('deliveries.id', deliveryIds)
    .joinRaw('CROSS JOIN LATERAL delivery_attempts(deliveries.id) AS attempts')
    .orderBy('attempts.started_at')
    .select('attempts.*');
  for (const row of rows) byDelivery.set(row.delivery_id, [...(byDelivery.get(row.delivery_id) ?? []), row]);
  return byDelivery;
}
