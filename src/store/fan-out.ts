import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';

export interface NewEvent {
  id: string;
  tenantId: string;
  type: string;
  createdAt: Date;
  /**
   * events.seq. Not used as the per-message order: it is drawn when the event row is inserted, before
   * the message's row lock is taken, so two events of one message racing each other can commit in the
   * opposite order of their seq (see `orderPosition`).
   */
  seq: number;
  /** The message the event concerns, scoped to its source: the unit of per-message ordering. */
  messageKey?: string | null;
  /** The provider's own sequence or version, when it sends one; it orders before acceptance order. */
  providerSequence?: number | null;
}

export interface FanOutResult {
  pending: number;
  deadDisabled: number;
}

/**
 * Creates one delivery per endpoint of the tenant whose filter matches the event type, in the
 * caller's transaction. Disabled endpoints get a dead `endpoint_disabled` delivery instead of none,
 * so what piles up while an endpoint is off can be replayed once it is back. Operational events
 * (`platform.*`) only reach endpoints that name them: a catch-all endpoint never receives a type
 * it did not know existed.
 */
export async function fanOut(trx: Knex.Transaction, event: NewEvent, defaultMaxAgeSeconds: number): Promise<FanOutResult> {
  const { rows: endpoints } = await trx.raw<{ rows: Array<{ id: string; status: string; ordering: string; max_age: number | null }> }>(
    `SELECT id, status, ordering, (retry_policy->>'maxEventAgeSeconds')::int AS max_age
       FROM endpoints
      WHERE tenant_id = ? AND deleted_at IS NULL
        AND ((cardinality(event_types) = 0 AND NOT starts_with(?, 'platform.')) OR ? = ANY(event_types)
             OR EXISTS (SELECT 1 FROM unnest(event_types) f WHERE right(f, 2) = '.*' AND starts_with(?, left(f, -1))))`,
    [event.tenantId, event.type, event.type, event.type],
  );
  if (endpoints.length === 0) return { pending: 0, deadDisabled: 0 };
  const at = event.createdAt.getTime();
  const orderSeq = event.messageKey && endpoints.some((ep) => ep.ordering === 'per-message') ? await orderPosition(trx) : null;
  const rows = endpoints.map((ep) => {
    const active = ep.status === 'active';
    const ordered = ep.ordering === 'per-message' && event.messageKey;
    return {
      id: newId('delivery'),
      tenant_id: event.tenantId,
      event_id: event.id,
      endpoint_id: ep.id,
      status: active ? 'pending' : 'dead',
      dead_reason: active ? null : 'endpoint_disabled',
      last_error: active ? null : 'endpoint was disabled when the event was accepted',
      next_attempt_at: active ? event.createdAt : null,
      deadline_at: new Date(at + (ep.max_age ?? defaultMaxAgeSeconds) * 1000),
      order_key: ordered ? event.messageKey : null,
      order_hint: ordered ? (event.providerSequence ?? null) : null,
      order_seq: ordered ? orderSeq : null,
      created_at: event.createdAt,
      updated_at: event.createdAt,
    };
  });
  await trx('deliveries').insert(rows);
  const deadDisabled = rows.filter((r) => r.status === 'dead').length;
  return { pending: rows.length - deadDisabled, deadDisabled };
}

/**
 * The event's place in its message's acceptance order. Both callers (callback intake and the publish
 * API) have already written the message's row in this transaction, so they hold its row lock until
 * commit: a position drawn now is drawn in the same order as the message's events commit, which is
 * also the order in which its status advanced. events.seq is not: it is taken before the lock, so a
 * `delivered` callback can get a lower seq than a racing `sent` one that commits first (both are
 * accepted: `sent` advanced the message, then `delivered`), and ordering by seq handed receivers
 * `delivered` before `sent`. Positions are only compared within one line, so
 * any increasing source does; events.seq's sequence is used because it needs no schema change.
 */
async function orderPosition(trx: Knex.Transaction): Promise<string> {
  const { rows } = await trx.raw<{ rows: Array<{ pos: string }> }>(`SELECT nextval(pg_get_serial_sequence('events', 'seq'))::text AS pos`);
  return rows[0]!.pos;
}
