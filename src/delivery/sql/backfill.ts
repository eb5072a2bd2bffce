/**
 * backfill: (none) → pending. A backfill creates the deliveries an endpoint would have had, had it
 * existed (or matched) when the events were accepted. The store chose the events (under the
 * endpoint's backfill lock, see store/backfill-store.ts); this writes them, run inside that
 * transaction.
 *
 * Like fan_out_write's rows, except for when they start: the n-th starts n / rate seconds from now
 * (paced like a bulk replay, tagged with its replays row so GET /v1/replays/:id follows them), and
 * its maximum event age runs from that start, not from the event's acceptance, which for a past
 * event would already have passed. A per-message endpoint's delivery carries the message's order:
 * the key fan-out gives it ('<source or api>:<message id>'), the provider's sequence, and the
 * event's own place (events.seq, drawn when it was written, so older events sort first).
 * fan_out_write is not reused: it starts every row at its event's time and knows no replay.
 */
import type { Knex } from 'knex';
import { idOfUuid, uuidOf } from '../../domain/ids.js';

export interface BackfillRows {
  tenantId: string;
  endpointId: string;
  replayId: string;
  /** The events, as stored, in the order their deliveries should start. */
  eventIds: string[];
  /** One per event, as stored (newStoredId: made in TypeScript, since ids made in SQL are not monotonic). */
  deliveryIds: string[];
  ratePerSecond: number;
  /** MAX_EVENT_AGE_SECONDS, when the endpoint's retryPolicy sets none. */
  defaultMaxAgeSeconds: number;
}

/**
 * Writes one pending delivery per event; an (event, endpoint) pair that has one already is left as
 * it is (the unique key deliveries_event_endpoint decides). Answers the ids written.
 */
export async function insertBackfillDeliveries(trx: Knex.Transaction, rows: BackfillRows): Promise<string[]> {
  if (rows.eventIds.length !== rows.deliveryIds.length) throw new Error('insertBackfillDeliveries: one delivery id per event');
  if (rows.eventIds.length === 0) return [];
  const start = 'now() + make_interval(secs => o.ord / :rate::float8)';
  const { rows: written } = await trx.raw<{ rows: Array<{ id: string }> }>(
    `INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, next_trigger, next_attempt_at, deadline_at,
                             order_key, order_hint, order_seq, replay_id, created_at, updated_at)
     SELECT o.delivery_id, ev.tenant_id, ev.id, ep.id, 'pending', 'initial', ${start},
            ${start} + make_interval(secs => coalesce((ep.retry_policy->>'maxEventAgeSeconds')::int, :maxAge)),
            CASE WHEN ep.ordering = 'per-message' AND ev.message_id IS NOT NULL THEN coalesce(ev.source_id, 'api') || ':' || ev.message_id END,
            CASE WHEN ep.ordering = 'per-message' AND ev.message_id IS NOT NULL THEN ev.provider_sequence END,
            CASE WHEN ep.ordering = 'per-message' AND ev.message_id IS NOT NULL THEN ev.seq END,
            :replayId, now(), now()
       FROM unnest(:eventIds::uuid[], :deliveryIds::uuid[]) WITH ORDINALITY AS o(event_id, delivery_id, ord)
       JOIN events ev ON ev.id = o.event_id AND ev.tenant_id = :tenantId
       JOIN endpoints ep ON ep.id = :endpointId AND ep.tenant_id = :tenantId
      ORDER BY o.ord
     ON CONFLICT (event_id, endpoint_id) DO NOTHING
     RETURNING id`,
    {
      eventIds: rows.eventIds,
      deliveryIds: rows.deliveryIds,
      rate: rows.ratePerSecond,
      maxAge: rows.defaultMaxAgeSeconds,
      replayId: rows.replayId,
      tenantId: uuidOf('tenant', rows.tenantId),
      endpointId: uuidOf('endpoint', rows.endpointId),
    },
  );
  return written.map((r) => idOfUuid('delivery', r.id));
}
