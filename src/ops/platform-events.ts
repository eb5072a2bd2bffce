import type { Knex } from 'knex';
import { RawJson } from '../domain/raw-json.js';
import { publishEvent } from '../store/events-store.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { deadDeliveriesToReport, hasSubscriber } from '../store/platform-events-store.js';
import { TenantScope } from '../store/tenant-scope.js';

export const platformEventTypes = {
  endpointDisabled: 'platform.endpoint.disabled',
  endpointFailing: 'platform.endpoint.failing',
  deliveryDead: 'platform.delivery.dead',
  endpointPaused: 'platform.endpoint.paused',
  endpointResumed: 'platform.endpoint.resumed',
} as const;

const system = { type: 'system', id: null } as const;

const nothing: FanOutResult = { pending: 0, deadDisabled: 0 };

/**
 * Publishes one operational event through the normal path (event row, deliveries, dispatcher).
 * The idempotency key makes a repeated emission (two sweepers, a retried statement) one event.
 * Returns what its fan-out created, for the delivery lifecycle to account for.
 */
async function emit(platformDb: Knex, tenantId: string, type: string, key: string, data: unknown, defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  const scope = new TenantScope(platformDb, tenantId, system);
  if (!(await hasSubscriber(scope, type))) return nothing;
  // An operational event is an event of its own, in a trace of its own.
  const result = await publishEvent(scope, { type, data: RawJson.of(data), idempotencyKey: key, origin: 'platform' }, defaultMaxAgeSeconds);
  return result.fanOut;
}

export async function emitEndpointDisabled(db: Knex, endpoint: { id: string; tenantId: string; reason: string }, defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  return emit(
    db,
    endpoint.tenantId,
    platformEventTypes.endpointDisabled,
    `${platformEventTypes.endpointDisabled}:${endpoint.id}:${Date.now()}`,
    { endpointId: endpoint.id, reason: endpoint.reason },
    defaultMaxAgeSeconds,
  );
}

/** `platform.endpoint.paused` or `platform.endpoint.resumed`: `{endpointId, reason?, at}`. */
export async function emitEndpointHeld(
  db: Knex,
  change: { kind: 'paused' | 'resumed'; id: string; tenantId: string; reason: string | null; at: Date },
  defaultMaxAgeSeconds: number,
): Promise<FanOutResult> {
  const type = change.kind === 'paused' ? platformEventTypes.endpointPaused : platformEventTypes.endpointResumed;
  const data = { endpointId: change.id, ...(change.reason !== null && { reason: change.reason }), at: change.at.toISOString() };
  return emit(db, change.tenantId, type, `${type}:${change.id}:${change.at.getTime()}`, data, defaultMaxAgeSeconds);
}

/**
 * One `platform.endpoint.failing` per threshold the streak newly passed, in order. The key names the
 * streak (its start) and the threshold, so each is one event however often it is emitted.
 */
export async function emitEndpointFailing(
  db: Knex,
  endpoint: { id: string; tenantId: string; failingSince: Date; thresholds: number[]; lastError: string | null },
  defaultMaxAgeSeconds: number,
): Promise<FanOutResult> {
  const total = { ...nothing };
  const failingSince = endpoint.failingSince.toISOString();
  for (const threshold of endpoint.thresholds) {
    const key = `${platformEventTypes.endpointFailing}:${endpoint.id}:${failingSince}:${threshold}`;
    const data = { endpointId: endpoint.id, threshold, failingSince, lastError: endpoint.lastError };
    const r = await emit(db, endpoint.tenantId, platformEventTypes.endpointFailing, key, data, defaultMaxAgeSeconds);
    total.pending += r.pending;
    total.deadDisabled += r.deadDisabled;
  }
  return total;
}

/**
 * One `platform.delivery.dead` per newly dead delivery. A dead delivery of an operational event
 * produces nothing, so a failing subscriber of operational events cannot start a loop.
 */
export async function emitDeliveriesDead(db: Knex, deliveryIds: string[], defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  if (deliveryIds.length === 0) return nothing;
  const rows = await deadDeliveriesToReport(db, deliveryIds);
  const total = { ...nothing };
  for (const d of rows) {
    const data = {
      deliveryId: d.id,
      eventId: d.event_id,
      eventType: d.type,
      endpointId: d.endpoint_id,
      reason: d.dead_reason,
      lastError: d.last_error,
      lastStatusCode: d.last_status_code,
      attempts: d.attempt_count,
    };
    const key = `${platformEventTypes.deliveryDead}:${d.id}:${d.attempt_count}`;
    const r = await emit(db, d.tenant_id, platformEventTypes.deliveryDead, key, data, defaultMaxAgeSeconds);
    total.pending += r.pending;
    total.deadDisabled += r.deadDisabled;
  }
  return total;
}
