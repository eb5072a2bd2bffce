import { AppError } from '../domain/errors.js';
import { uuidOfId } from '../domain/ids.js';
import { typeIdTime } from '../domain/retention.js';
import { deliveryColumns, withDeliveryState, type DeliveryRow } from './deliveries-store.js';
import { eventColumns, whereEventType, type EventRow } from './events-store.js';
import { watermark } from './retention-store.js';
import type { TenantScope } from './tenant-scope.js';

export interface EventSearch {
  type?: string;
  messageId?: string;
  since?: Date;
  until?: Date;
}

/** Events by type (or a type prefix ending in `.*`), message id and time range; for paginate. */
export function searchEventsQuery(scope: TenantScope, f: EventSearch) {
  const q = scope.from('events').select(eventColumns(scope));
  if (f.type) whereEventType(q, 'events.type', f.type);
  if (f.messageId) q.where('events.message_id', f.messageId);
  if (f.since) q.where('events.created_at', '>=', f.since);
  if (f.until) q.where('events.created_at', '<', f.until);
  return q;
}

/** One event with how many callbacks carried it and its deliveries, or undefined. */
export async function findEventWithDeliveries(scope: TenantScope, id: string): Promise<{ event: EventRow; receiptCount: number; deliveries: DeliveryRow[] } | undefined> {
  const key = uuidOfId('event', id);
  if (key === null) return undefined;
  const event: EventRow | undefined = await scope.from('events').where('events.id', key).first(eventColumns(scope));
  if (!event) return undefined;
  const [{ count }] = await scope.from('receipts').where('receipts.event_id', event.id).count({ count: '*' });
  const deliveries: DeliveryRow[] = await withDeliveryState(scope.from('deliveries')).where('deliveries.event_id', event.id).orderBy('deliveries.id').select(deliveryColumns);
  return { event, receiptCount: Number(count), deliveries };
}

/**
 * An event id says when it was made: one older than what retention has removed, and not found, has
 * expired (404 `expired`). Anything else not found is an ordinary 404; an id of an event that never
 * existed in the removed range cannot be told apart, and also answers `expired`.
 */
export async function expiredEvent(scope: TenantScope, id: string): Promise<AppError | undefined> {
  const madeAt = typeIdTime(id);
  const removedBefore = madeAt && (await watermark(scope, 'events'));
  if (!madeAt || !removedBefore || madeAt >= removedBefore) return undefined;
  return new AppError(404, 'expired', `event ${id} has expired: retention removed events made before ${removedBefore.toISOString()}`);
}
