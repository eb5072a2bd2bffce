/**
 * Back-dated data for retention tests: rows whose ids (TypeIDs, which carry their creation time) and
 * timestamps lie days in the past, in the partitions those days need, as intake and dispatch would
 * have left them then.
 */
import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { fromUUID } from 'typeid-js';
import { idPrefixes, uuidOf, type IdKind } from '../../src/domain/ids.js';
import { ensurePartitions } from '../../src/store/partitions-store.js';
import { storedAttempt } from './database.js';

export const dayMs = 86_400_000;

/** The name of `table`'s partition that begins on `at`'s day, as the partition upkeep names it (db/functions/time_partition_name.sql). */
export const partitionName = (table: string, at: Date) => `${table}_p${at.toISOString().slice(0, 10).replaceAll('-', '')}`;
export const daysAgo = (days: number, from = Date.now()) => new Date(from - days * dayMs);

/** A TypeID of this kind made at `at` (a UUIDv7 with that time and random bits). */
export function idAt(kind: IdKind, at: Date): string {
  const hex = at.getTime().toString(16).padStart(12, '0') + randomBytes(10).toString('hex');
  const uuid = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-7${hex.slice(13, 16)}-${((parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  return fromUUID(uuid, idPrefixes[kind]).toString();
}

export interface OldDelivery {
  endpointId: string;
  status: 'pending' | 'queued' | 'in_flight' | 'succeeded' | 'dead';
  /** When it reached its status (a dead delivery's death); the event's time unless given. */
  updatedAt?: Date;
}

export interface OldEvent {
  eventId: string;
  deliveryIds: string[];
}

/**
 * One event made at `at` with a dedupe key claimed in event_keys, a receipt, and a delivery per
 * entry, each with one attempt (a success stored in its delivery, as the first try it is). Creates
 * the partitions that day needs.
 */
export async function insertOldEvent(
  db: Knex,
  spec: { tenantId: string; sourceId: string; at: Date; dedupeKey: string; deliveries: OldDelivery[] },
): Promise<OldEvent> {
  const { sourceId, at } = spec;
  const tenantId = uuidOf('tenant', spec.tenantId);
  await ensurePartitions(db, at, new Date(at.getTime() + 1), 'day');
  const eventId = idAt('event', at);
  // Stored as the uuid its TypeID encodes; its body names it by the TypeID.
  const eventKey = uuidOf('event', eventId);
  await db('events').insert({
    id: eventKey, tenant_id: tenantId, source_id: sourceId, origin: 'callback', type: 'order.created',
    dedupe_key: spec.dedupeKey, body: JSON.stringify({ id: eventId, type: 'order.created', data: {} }), created_at: at,
  });
  await db('event_keys').insert({ scope_id: sourceId, key: spec.dedupeKey, event_id: eventKey });
  await db('receipts').insert({
    id: idAt('receipt', at), tenant_id: tenantId, source_id: sourceId, event_id: eventKey, outcome: 'accepted', origin: 'callback',
    body_digest: randomBytes(16).toString('hex'), received_at: at,
  });
  const deliveryIds: string[] = [];
  for (const d of spec.deliveries) {
    const id = idAt('delivery', at);
    const updatedAt = d.updatedAt ?? at;
    const unfinished = d.status !== 'succeeded' && d.status !== 'dead';
    const stored = uuidOf('delivery', id);
    await db('deliveries').insert({
      id: stored, tenant_id: tenantId, event_id: eventKey, endpoint_id: uuidOf('endpoint', d.endpointId), status: d.status, attempt_count: 1,
      next_attempt_at: d.status === 'pending' ? new Date(Date.now() + 3_600_000) : null,
      lease_until: d.status === 'queued' || d.status === 'in_flight' ? new Date(Date.now() + 3_600_000) : null,
      deadline_at: unfinished ? new Date(Date.now() + dayMs) : at,
      dead_reason: d.status === 'dead' ? 'max_attempts' : null,
      succeeded_at: d.status === 'succeeded' ? updatedAt : null,
      created_at: at, updated_at: updatedAt,
    });
    // Stored where the recording functions store it: a first try that succeeded in its delivery.
    const attempt = { trigger: 'initial', attempt_number: 1, started_at: at, duration_ms: 5, ...(d.status === 'succeeded' ? { status_code: 200, outcome: 'success' } : { status_code: 503, outcome: 'retry' }) };
    const { rows } = await db.raw<{ rows: Array<{ inDelivery: boolean }> }>('SELECT attempt_stored_in_delivery(?, ?, ?) AS "inDelivery"', [attempt.trigger, attempt.attempt_number, attempt.outcome]);
    if (rows[0]!.inDelivery) {
      await db('deliveries').where({ id: stored }).update({ first_try_started_at: at, first_try_duration_ms: attempt.duration_ms, first_try_status_code: attempt.status_code });
    } else {
      await db('attempts').insert(storedAttempt(db, { id: idAt('attempt', at), delivery_id: stored, ...attempt }));
    }
    deliveryIds.push(id);
  }
  return { eventId, deliveryIds };
}

/** Rows of `table` whose `column` is one of `ids`. */
export async function countWhereIn(db: Knex, table: string, column: string, ids: string[]): Promise<number> {
  const rows = await db(table).whereIn(column, ids).count({ n: '*' });
  return Number(rows[0]?.n ?? 0);
}
