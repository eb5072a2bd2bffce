import type { Knex } from 'knex';
import { RawJson } from '../domain/raw-json.js';
import { publishEvent } from '../store/events-store.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { TenantScope } from '../store/tenant-scope.js';

export const platformEventTypes = { endpointDisabled: 'platform.endpoint.disabled', deliveryDead: 'platform.delivery.dead' } as const;

const system = { type: 'system', id: null } as const;

/** True when some live endpoint of the tenant names the type (exactly or by a `platform.*`-style prefix). */
async function hasSubscriber(db: Knex, tenantId: string, type: string): Promise<boolean> {
  const { rows } = await db.raw(
    `SELECT 1 FROM endpoints
      WHERE tenant_id = ? AND deleted_at IS NULL
        AND (? = ANY(event_types) OR EXISTS (SELECT 1 FROM unnest(event_types) f WHERE right(f, 2) = '.*' AND starts_with(?, left(f, -1))))
      LIMIT 1`,
    [tenantId, type, type],
  );
  return rows.length > 0;
}

const nothing: FanOutResult = { pending: 0, deadDisabled: 0 };

/**
 * Publishes one operational event through the normal path (event row, deliveries, dispatcher).
 * The idempotency key makes a repeated emission (two sweepers, a retried statement) one event.
 * Returns what its fan-out created, for the delivery lifecycle to account for.
 */
async function emit(db: Knex, tenantId: string, type: string, key: string, data: unknown, defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  if (!(await hasSubscriber(db, tenantId, type))) return nothing;
  const scope = new TenantScope(db, tenantId, system);
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

/**
 * One `platform.delivery.dead` per newly dead delivery. A dead delivery of an operational event
 * produces nothing, so a failing subscriber of operational events cannot start a loop.
 */
export async function emitDeliveriesDead(db: Knex, deliveryIds: string[], defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  if (deliveryIds.length === 0) return nothing;
  const { rows } = await db.raw<{ rows: Array<Record<string, any>> }>(
    `SELECT d.id, d.tenant_id, d.event_id, d.endpoint_id, d.dead_reason, d.last_error, d.last_status_code, d.attempt_count, ev.type
       FROM deliveries d JOIN events ev ON ev.id = d.event_id
      WHERE d.id = ANY(?) AND d.status = 'dead' AND NOT starts_with(ev.type, 'platform.')`,
    [deliveryIds],
  );
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
