import { createHash } from 'node:crypto';
import { canonicalJson } from '../domain/dedupe.js';
import { conflict } from '../domain/errors.js';
import { newId } from '../domain/ids.js';
import { fanOut, type FanOutResult } from './fan-out.js';
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
    ...(opts.payload ? { payload: JSON.parse(row.body) as unknown } : {}),
  };
}

export interface PublishInput {
  type: string;
  messageId?: string;
  data: unknown;
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
    .update(canonicalJson({ type: input.type, messageId: input.messageId ?? null, data: input.data }))
    .digest('hex');
  const idempotencyKey = input.idempotencyKey ?? null;
  return scope.transaction(async (s, trx) => {
    const id = newId('event');
    const now = new Date();
    const inserted: EventRow[] = await trx('events')
      .insert({
        id,
        tenant_id: s.tenantId,
        origin: input.origin ?? 'api',
        type: input.type,
        message_id: input.messageId ?? null,
        idempotency_key: idempotencyKey,
        request_hash: requestHash,
        body: outboundBody(id, input.type, now, input.messageId, input.data),
        created_at: now,
      })
      .onConflict(['tenant_id', 'idempotency_key'])
      .ignore()
      .returning(eventColumns.map((c) => c.replace('events.', '')));
    if (inserted.length === 0) {
      const existing = await s.from('events').where('events.idempotency_key', idempotencyKey).first([...eventColumns, 'events.request_hash']);
      if (existing.request_hash !== requestHash) {
        throw conflict('idempotency_key_reused', 'this Idempotency-Key was already used for a different request');
      }
      return { event: existing as EventRow, duplicate: true, fanOut: { pending: 0, deadDisabled: 0 } };
    }
    const event = inserted[0]!;
    if (input.messageId) {
      await trx.raw(
        `INSERT INTO messages AS m (tenant_id, source_id, message_id, last_event_id) VALUES (?, NULL, ?, ?)
         ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE SET last_event_id = EXCLUDED.last_event_id, updated_at = now()`,
        [s.tenantId, input.messageId, id],
      );
    }
    const fan = await fanOut(
      trx,
      { id, tenantId: s.tenantId, type: input.type, createdAt: now, messageKey: input.messageId ? `api:${input.messageId}` : null },
      defaultMaxAgeSeconds,
    );
    return { event, duplicate: false, fanOut: fan };
  });
}
