import { attemptsFor, deliveryColumns, rowToDelivery, withDeliveryState, type DeliveryRow } from './deliveries-store.js';
import { eventColumns, rowToEvent, type EventRow } from './events-store.js';
import type { TenantScope } from './tenant-scope.js';

interface MessageRow {
  source_id: string | null;
  status: string | null;
  status_rank: number;
  status_final: boolean;
  updated_at: Date;
}

/**
 * The troubleshooting view: from one message id to its status, every event about it, the callbacks
 * (receipts) behind each event, and every delivery with its attempts.
 */
export async function messageTimeline(outer: TenantScope, messageId: string) {
  // Events, deliveries and attempts as of one moment: a success recorded between two of the reads
  // would otherwise show on a delivery still in flight.
  return outer.snapshot((scope) => readTimeline(scope, messageId));
}

async function readTimeline(scope: TenantScope, messageId: string) {
  const messages: MessageRow[] = await scope.from('messages').where('messages.message_id', messageId).orderBy('messages.status_rank', 'desc');
  if (messages.length === 0) return undefined;
  const events: EventRow[] = await scope.from('events').where('events.message_id', messageId).orderBy('events.seq').select(eventColumns(scope));
  const eventIds = events.map((e) => e.id);
  const receipts: Array<{ event_id: string; received_at: Date }> = eventIds.length
    ? await scope.from('receipts').whereIn('receipts.event_id', eventIds).orderBy('receipts.received_at').select('event_id', 'received_at')
    : [];
  const deliveries: DeliveryRow[] = eventIds.length
    ? await withDeliveryState(scope.from('deliveries')).whereIn('deliveries.event_id', eventIds).orderBy('deliveries.id').select(deliveryColumns)
    : [];
  const attempts = await attemptsFor(scope, deliveries.map((d) => d.id));
  const current = messages[0]!;
  return {
    messageId,
    status: current.status,
    final: current.status_final,
    updatedAt: current.updated_at.toISOString(),
    events: events.map((e) => {
      const times = receipts.filter((r) => r.event_id === e.id).map((r) => r.received_at.toISOString());
      return {
        ...rowToEvent(e, { payload: true }),
        receipts: { count: times.length, first: times[0] ?? null, last: times.at(-1) ?? null, times: times.slice(0, 100) },
        deliveries: deliveries.filter((d) => d.event_id === e.id).map((d) => rowToDelivery(d, attempts.get(d.id) ?? [])),
      };
    }),
  };
}
