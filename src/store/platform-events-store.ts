import type { Knex } from 'knex';
import { idOfUuid, uuidOf } from '../domain/ids.js';
import type { TenantScope } from './tenant-scope.js';

/** True when some live endpoint of the tenant names the type (exactly or by a `platform.*`-style prefix). */
export async function hasSubscriber(scope: TenantScope, type: string): Promise<boolean> {
  const found = await scope
    .from('endpoints')
    .whereNull('endpoints.deleted_at')
    // Raw: the builder has no `= ANY(array)` nor unnest.
    .whereRaw(
      `(:type = ANY(endpoints.event_types)
        OR EXISTS (SELECT 1 FROM unnest(endpoints.event_types) f WHERE right(f, 2) = '.*' AND starts_with(:type, left(f, -1))))`,
      { type },
    )
    .first('endpoints.id');
  return found !== undefined;
}

export interface DeadDeliveryRow {
  id: string;
  tenant_id: string;
  event_id: string;
  endpoint_id: string;
  dead_reason: string | null;
  last_error: string | null;
  last_status_code: number | null;
  attempt_count: number;
  type: string;
}

/**
 * Those of `deliveryIds` that are dead and carry a tenant's own event (not an operational one), with
 * what `platform.delivery.dead` reports. Unscoped: the platform reports on every tenant's deliveries.
 */
export async function deadDeliveriesToReport(platformDb: Knex, deliveryIds: string[]): Promise<DeadDeliveryRow[]> {
  const rows: DeadDeliveryRow[] = await platformDb('deliveries as d')
    .join('events as ev', 'ev.id', 'd.event_id')
    .whereRaw('d.id = ANY(:deliveryIds::uuid[])', { deliveryIds: deliveryIds.map((id) => uuidOf('delivery', id)) })
    .where('d.status', 'dead')
    .whereRaw(`NOT starts_with(ev.type, 'platform.')`)
    .select('d.id', 'd.tenant_id', 'd.event_id', 'd.endpoint_id', 'd.dead_reason', 'd.last_error', 'd.last_status_code', 'd.attempt_count', 'ev.type');
  return rows.map((r) => ({ ...r, id: idOfUuid('delivery', r.id), tenant_id: idOfUuid('tenant', r.tenant_id), event_id: idOfUuid('event', r.event_id), endpoint_id: idOfUuid('endpoint', r.endpoint_id) }));
}
