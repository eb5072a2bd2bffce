import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { canonicalJson } from '../domain/dedupe.js';
import { conflict } from '../domain/errors.js';
import { eventTypePrefix } from '../domain/event-types.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { newId } from '../domain/ids.js';
import { RawJson } from '../domain/raw-json.js';
import { statement, type WarmUp } from '../infra/sql.js';
import { withDeliveryIds } from './delivery-ids.js';
import { outboundBody } from './intake-store.js';
import type { TenantScope } from './tenant-scope.js';

export interface EventRow {
  id: string;
  tenant_id: string;
  source_id: string | null;
  origin: string;
  type: string;
  message_id: string | null;
  status: string | null;
  stale: boolean;
  body: string;
  created_at: Date;
  seq: number;
}

export const eventColumns = ['id', 'tenant_id', 'source_id', 'origin', 'type', 'message_id', 'status', 'stale', 'body', 'created_at', 'seq'].map(
  (c) => `events.${c}`,
);

/**
 * Narrows a query to one event type, or to a prefix when the filter ends in `.*`, the same rule as
 * endpoint subscriptions. starts_with, not LIKE: `_` and `%` are legal in types and must match literally.
 */
export function whereEventType<Q extends Knex.QueryBuilder>(q: Q, column: string, filter: string): Q {
  const prefix = eventTypePrefix(filter);
  return (prefix === undefined ? q.where(column, filter) : q.whereRaw('starts_with(:column:, :prefix)', { column, prefix })) as Q;
}

export function rowToEvent(row: EventRow, opts: { payload?: boolean } = {}) {
  return {
    id: row.id,
    type: row.type,
    messageId: row.message_id,
    sourceId: row.source_id,
    origin: row.origin,
    status: row.status,
    stale: row.stale,
    createdAt: row.created_at.toISOString(),
    // The stored envelope as sent, so the API shows the payload's digits and escapes as received.
    ...(opts.payload ? { payload: new RawJson(row.body) } : {}),
  };
}

export interface PublishInput {
  type: string;
  messageId?: string;
  /** Forwarded as written: the request's own text for a tenant's event, RawJson.of for the platform's. */
  data: RawJson;
  idempotencyKey?: string;
  /** Operational events the platform publishes about itself. */
  origin?: 'api' | 'platform';
}

/**
 * Tenant-published events. The same Idempotency-Key returns the first event and creates no work;
 * reusing a key for a different request is a client bug and answers 409 instead of guessing.
 */
export async function publishEvent(
  scope: TenantScope,
  input: PublishInput,
  defaultMaxAgeSeconds: number,
): Promise<{ event: EventRow; duplicate: boolean; fanOut: FanOutResult }> {
  const requestHash = createHash('sha256')
    .update(canonicalJson({ type: input.type, messageId: input.messageId ?? null, data: input.data.parse() }))
    .digest('hex');
  const idempotencyKey = input.idempotencyKey ?? null;
  const id = newId('event');
  const now = new Date();
  const row = await withDeliveryIds(scope.tenantId, input.type, async (deliveryIds) => {
    const rows = await scope.run<PublishRow>(publishStatement, {
      eventId: id, deliveryIds, origin: input.origin ?? 'api', type: input.type,
      messageId: input.messageId ?? null, idempotencyKey, requestHash,
      body: outboundBody(id, input.type, now, input.messageId, input.data), createdAt: now, defaultMaxAgeSeconds,
    });
    return rows[0]!;
  });
  const event: EventRow = {
    id: row.id, tenant_id: row.tenant_id, source_id: row.source_id, origin: row.origin, type: row.type, message_id: row.message_id,
    status: row.status, stale: row.stale, body: row.body, created_at: row.created_at, seq: row.seq,
  };
  if (row.outcome === 'duplicate') {
    if (row.request_hash !== requestHash) {
      throw conflict('idempotency_key_reused', 'this Idempotency-Key was already used for a different request');
    }
    return { event, duplicate: true, fanOut: { pending: 0, deadDisabled: 0 } };
  }
  return { event, duplicate: false, fanOut: { pending: row.pending, deadDisabled: row.dead_disabled } };
}

interface PublishRow extends EventRow {
  outcome: 'created' | 'duplicate' | 'need_ids';
  endpoint_count: number;
  pending: number;
  dead_disabled: number;
  request_hash: string | null;
}

/** `publish_event` (db/functions/publish_event.sql): event, message row and fan-out in one statement. */
const publishStatement = statement(
  'publish_event',
  `SELECT * FROM publish_event(:eventId, :deliveryIds::text[], :tenantId, :origin, :type, :messageId, :idempotencyKey,
                               :requestHash, :body, :createdAt::timestamptz, :defaultMaxAgeSeconds::int)`,
);

const anyTenantStatement = statement('warm_up_tenant', 'SELECT id FROM tenants ORDER BY id LIMIT 1');

/**
 * POST /v1/events's statement for an event of a type no endpoint asks for (see WarmUp): publish_event
 * needs a tenant that exists, so it warms nothing before the first tenant is made.
 */
export const warmPublish: WarmUp = async (run) => {
  const [tenant] = await run<{ id: string }>(anyTenantStatement, {});
  if (!tenant) return;
  const eventId = newId('event');
  const now = new Date();
  await run(publishStatement, {
    eventId, deliveryIds: [], tenantId: tenant.id, origin: 'api', type: 'platform.warm_up', messageId: null, idempotencyKey: null,
    requestHash: null, body: outboundBody(eventId, 'platform.warm_up', now, undefined, {}), createdAt: now, defaultMaxAgeSeconds: 0,
  });
};
