import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import { canonicalJson } from '../domain/dedupe.js';
import { conflict } from '../domain/errors.js';
import { eventTypePrefix } from '../domain/event-types.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { idOfUuid, lowestStoredId, newStoredId, uuidOf } from '../domain/ids.js';
import { RawJson, stringifyJson } from '../domain/raw-json.js';
import { startAccept } from '../infra/accept-spans.js';
import type { Span } from '../infra/tracing.js';
import { Batcher, groupCommit } from '../infra/batcher.js';
import { mayBeOneRowsFault } from '../infra/db.js';
import { run, statement, type WarmUp } from '../infra/sql.js';
import { withDeliveryIds } from './delivery-ids.js';
import type { TenantScope } from './tenant-scope.js';
import { makeWarmUpTenant, type WarmUpRun } from './warm-up-tenant.js';

/** An event read within its tenant's scope (so without its tenant). */
export interface EventRow {
  /** As stored: the uuid its TypeID encodes (rowToEvent names it). */
  id: string;
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

const storedColumns = ['id', 'source_id', 'origin', 'type', 'message_id', 'status', 'stale', 'created_at', 'seq'].map((c) => `events.${c}`);

/** An EventRow's columns, from a query over `events` (unaliased); the body is built by event_body. */
export function eventColumns(scope: TenantScope): Array<string | Knex.Raw> {
  return [...storedColumns, eventBody(scope)];
}

/** The body every endpoint receives, as `body` (db/functions/event_body.sql). */
export function eventBody(scope: TenantScope): Knex.Raw {
  return scope.expression('event_body(events) AS body');
}

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
    id: idOfUuid('event', row.id),
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
  /** The publishing request's span, when it is traced: the event's trace continues it. */
  span?: Span;
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
  const idempotencyKey = input.idempotencyKey ?? null;
  // What a repeat of the key is compared with; without a key nothing is, so nothing is hashed or stored.
  const requestHash =
    idempotencyKey === null
      ? null
      : createHash('sha256')
          .update(canonicalJson({ type: input.type, messageId: input.messageId ?? null, data: input.data.parse() }))
          .digest('hex');
  // Drawn as stored and named for the envelope: cheaper than a TypeID converted (newStoredId says why).
  const key = newStoredId();
  const id = idOfUuid('event', key);
  const now = new Date();
  const spans = startAccept({ 'webhook.origin': input.origin ?? 'api', 'webhook.event_type': input.type }, input.span);
  const row = await withDeliveryIds(scope.tenantId, input.type, async (deliveryIds) => {
    return scope.submit(publishBatcher, {
      eventId: id, eventKey: key, deliveryIds, origin: input.origin ?? 'api', type: input.type,
      messageId: input.messageId ?? null, idempotencyKey, requestHash,
      data: stringifyJson(input.data), createdAt: now.toISOString(), defaultMaxAgeSeconds,
      traceParent: spans?.traceParent ?? null,
    });
  }).catch((err: unknown) => {
    spans?.failed(err);
    throw err;
  });
  // The event's own id: a duplicate's is the first event's.
  spans?.stored({ outcome: row.outcome, eventId: idOfUuid('event', row.id), messageId: row.message_id, pending: row.pending, deadDisabled: row.dead_disabled });
  const event: EventRow = {
    id: row.id, source_id: row.source_id, origin: row.origin, type: row.type, message_id: row.message_id,
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

interface PublishItem {
  /** The event's TypeID, which its body names. */
  eventId: string;
  /** As stored: its uuid. */
  eventKey: string;
  /** As stored (withDeliveryIds). */
  deliveryIds: string[];
  tenantId: string;
  origin: string;
  type: string;
  messageId: string | null;
  idempotencyKey: string | null;
  /** Of the request's meaning (type, messageId, data), only with an idempotencyKey. */
  requestHash: string | null;
  /** The payload's JSON text; the envelope is db/functions/event_body.sql's. */
  data: string | undefined;
  createdAt: string;
  defaultMaxAgeSeconds: number;
  /** The event's fan-out span (src/infra/accept-spans.ts), stored with it; null when not traced. */
  traceParent: string | null;
}

/**
 * `publish_events` (db/functions/publish_events.sql: events, message rows and fan-out) for a batch,
 * in the items' order, in one statement: publishes share a commit, whose WAL flush was half of
 * PostgreSQL's CPU per published event when each had its own, and one INSERT per table, since
 * starting a statement is most of what an event's rows cost (docs/performance.md). An
 * Idempotency-Key used twice in one batch answers the second as a duplicate, as it would apart.
 */
const publishManyStatement = statement('publish_events', 'SELECT * FROM publish_events(:items::jsonb, :maxAge::int)');

function publishManyParams(items: PublishItem[]) {
  const maxAge = items[0]!.defaultMaxAgeSeconds;
  // One platform's publishes share its MAX_EVENT_AGE_SECONDS: a batch never mixes two.
  if (items.some((i) => i.defaultMaxAgeSeconds !== maxAge)) throw new Error('publishMany: one batch with two default maximum event ages');
  return {
    maxAge,
    items: JSON.stringify(
      items.map((i) => ({
        event_id: i.eventKey, envelope_id: i.eventId, delivery_ids: i.deliveryIds, tenant_id: uuidOf('tenant', i.tenantId), origin: i.origin, type: i.type, message_id: i.messageId,
        idempotency_key: i.idempotencyKey, request_hash: i.requestHash, data: i.data, created_at: i.createdAt, trace_parent: i.traceParent,
      })),
    ),
  };
}

async function publishMany(db: Knex, items: PublishItem[]): Promise<PublishRow[]> {
  const rows = await run<PublishRow & { ord: number }>(db, publishManyStatement, publishManyParams(items));
  return rows.map(({ ord: _ord, ...row }) => row);
}

/** One group commit per connection pool (groupCommit): publishes that come together share a commit. */
const publishBatchers = new WeakMap<Knex, Batcher<PublishItem, PublishRow>>();

function publishBatcher(db: Knex): Batcher<PublishItem, PublishRow> {
  let batcher = publishBatchers.get(db);
  if (!batcher) {
    batcher = new Batcher({ ...groupCommit, retryAlone: mayBeOneRowsFault, run: (items) => publishMany(db, items) });
    publishBatchers.set(db, batcher);
  }
  return batcher;
}

/**
 * Publishes `count` events through POST /v1/events's statement, to a tenant and an endpoint that
 * this warm-up makes (makeWarmUpTenant), so that every statement of the publish and of its fan-out
 * runs, as no empty batch makes them. Each event has one pending delivery to that endpoint, due now.
 */
export async function publishWarmUpEvents(run: WarmUpRun, count: number): Promise<{ endpointId: string }> {
  const { tenantId, endpointId, now } = await makeWarmUpTenant(run);
  const createdAt = now.toISOString();
  const items = Array.from({ length: count }, (): PublishItem => {
    const eventKey = newStoredId();
    return {
      eventId: idOfUuid('event', eventKey), eventKey, deliveryIds: [newStoredId()], tenantId: idOfUuid('tenant', tenantId), origin: 'api',
      type: 'warm_up.published', messageId: null, idempotencyKey: null, requestHash: null, data: '{}', createdAt, defaultMaxAgeSeconds: 3_600,
      traceParent: null,
    };
  });
  const rows = await run<PublishRow>(publishManyStatement, publishManyParams(items));
  if (rows.length !== count || rows.some((r) => r.outcome !== 'created' || r.pending !== 1)) {
    throw new Error(`warm-up: publishing ${count} events to the warm-up's endpoint answered ${JSON.stringify(rows.map((r) => [r.outcome, r.pending]))}`);
  }
  return { endpointId };
}

/** POST /v1/events's statement, with its fan-out's, for one event of the warm-up's own (publishWarmUpEvents). */
export const warmPublish: WarmUp = async (run) => {
  await publishWarmUpEvents(run, 1);
};
