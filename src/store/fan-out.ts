import type { Knex } from 'knex';

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
  // One statement: the matching endpoints are read and their deliveries written together, with ids
  // made by typeid_new() because the number of matches is only known inside the statement.
  const { rows } = await trx.raw<{ rows: Array<{ pending: number; dead: number }> }>(
    `WITH made AS (
       INSERT INTO deliveries (id, tenant_id, event_id, endpoint_id, status, dead_reason, last_error, next_attempt_at,
                               deadline_at, order_key, order_hint, order_seq, created_at, updated_at)
       SELECT typeid_new('dlv'), e.tenant_id, :eventId, e.id,
              CASE WHEN e.status = 'active' THEN 'pending' ELSE 'dead' END,
              CASE WHEN e.status = 'active' THEN NULL ELSE 'endpoint_disabled' END,
              CASE WHEN e.status = 'active' THEN NULL ELSE 'endpoint was disabled when the event was accepted' END,
              CASE WHEN e.status = 'active' THEN :at::timestamptz END,
              :at::timestamptz + make_interval(secs => COALESCE((e.retry_policy->>'maxEventAgeSeconds')::int, :maxAge)),
              CASE WHEN ordered THEN :messageKey::text END,
              CASE WHEN ordered THEN :hint::bigint END,
              -- Drawn here, under the message's row lock (see orderPosition below).
              CASE WHEN ordered THEN nextval(pg_get_serial_sequence('events', 'seq')) END,
              :at::timestamptz, :at::timestamptz
         FROM endpoints e, LATERAL (SELECT e.ordering = 'per-message' AND :messageKey::text IS NOT NULL AS ordered) o
        WHERE e.tenant_id = :tenantId AND e.deleted_at IS NULL
          AND ((cardinality(e.event_types) = 0 AND NOT starts_with(:type, 'platform.')) OR :type = ANY(e.event_types)
               OR EXISTS (SELECT 1 FROM unnest(e.event_types) f WHERE right(f, 2) = '.*' AND starts_with(:type, left(f, -1))))
       RETURNING status
     )
     SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending, count(*) FILTER (WHERE status = 'dead')::int AS dead FROM made`,
    {
      eventId: event.id,
      tenantId: event.tenantId,
      type: event.type,
      at: event.createdAt,
      maxAge: defaultMaxAgeSeconds,
      messageKey: event.messageKey ?? null,
      hint: event.providerSequence ?? null,
    },
  );
  return { pending: rows[0]!.pending, deadDisabled: rows[0]!.dead };
}

/*
 * Order positions. The event's place in its message's acceptance order. Both callers (callback intake and the publish
 * API) have already written the message's row in this transaction, so they hold its row lock until
 * commit: a position drawn now is drawn in the same order as the message's events commit, which is
 * also the order in which its status advanced. events.seq is not: it is taken before the lock, so a
 * `delivered` callback can get a lower seq than a racing `sent` one that commits first (both are
 * accepted: `sent` advanced the message, then `delivered`), and ordering by seq handed receivers
 * `delivered` before `sent`. Positions are only compared within one line, so
 * any increasing source does; events.seq's sequence is used because it needs no schema change.
 */
