import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import { run, statement } from '../infra/sql.js';
import type { ParsedEvent } from '../inbound/adapter.js';
import { withDeliveryIds, type FanOutResult } from './fan-out.js';

export type IntakeOutcome = 'accepted' | 'duplicate' | 'stale';

export interface SourceRef {
  id: string;
  tenantId: string;
}

export interface CallbackInput {
  source: SourceRef;
  origin: 'callback' | 'reconcile';
  bodyDigest: string;
  event: ParsedEvent;
  receivedAt: Date;
}

export interface IntakeRecord {
  outcome: IntakeOutcome;
  receiptId: string;
  eventId: string;
  fanOut: FanOutResult;
}

const none: FanOutResult = { pending: 0, deadDisabled: 0 };

/** The exact bytes every endpoint receives for this event, on every attempt. */
export function outboundBody(id: string, type: string, at: Date, messageId: string | undefined, data: unknown): string {
  return JSON.stringify({ id, type, timestamp: at.toISOString(), messageId: messageId ?? null, data });
}

const digestDuplicateStatement = statement(
  'intake_digest_duplicate',
  `INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest)
   SELECT :receiptId, :tenantId, :sourceId, r.event_id, 'duplicate', :origin, :bodyDigest
     FROM (SELECT event_id FROM receipts WHERE source_id = :sourceId AND body_digest = :bodyDigest LIMIT 1) r
   RETURNING event_id`,
);

/**
 * A byte-identical repeat of a body this source already sent is answered from the digest index in
 * one statement, without parsing or touching events: the cheap path of a provider retry storm.
 */
export async function recordDigestDuplicate(
  db: Knex,
  source: SourceRef,
  bodyDigest: string,
  origin: 'callback' | 'reconcile',
): Promise<IntakeRecord | undefined> {
  const receiptId = newId('receipt');
  const rows = await run<{ event_id: string }>(db, digestDuplicateStatement, {
    receiptId, tenantId: source.tenantId, sourceId: source.id, origin, bodyDigest,
  });
  const row = rows[0];
  return row ? { outcome: 'duplicate', receiptId, eventId: row.event_id, fanOut: none } : undefined;
}

const acceptStatement = statement(
  'intake_accept',
  `SELECT * FROM intake_accept(:receiptId, :eventId, :deliveryIds::text[], :tenantId, :sourceId, :origin, :bodyDigest,
                               :receivedAt::timestamptz, :type, :messageId, :dedupeKey, :status, :statusRank::int,
                               :statusFinal::boolean, :sequence::bigint, :body, :defaultMaxAgeSeconds::int)`,
);

/**
 * Accepting a callback is one statement, `intake_accept` (migration 20261129000011), and so one
 * transaction without BEGIN/COMMIT round trips: the event (unique on source + dedupe key), the
 * message's forward-only status, one delivery per matching endpoint, and the receipt. Nothing is
 * acknowledged before it commits. A duplicate dedupe key answers with the stored event and creates
 * no work; an event older than what its message already reached is stored as stale evidence and
 * forwarded to nobody.
 */
export async function recordCallback(db: Knex, input: CallbackInput, defaultMaxAgeSeconds: number): Promise<IntakeRecord> {
  const { source, event } = input;
  const receiptId = newId('receipt');
  const candidateId = newId('event');
  const body = outboundBody(candidateId, event.type, input.receivedAt, event.messageId, event.data);
  const row = await withDeliveryIds(source.tenantId, event.type, async (deliveryIds) => {
    const rows = await run<IntakeRow>(db, acceptStatement, {
      receiptId, eventId: candidateId, deliveryIds,
      tenantId: source.tenantId, sourceId: source.id, origin: input.origin, bodyDigest: input.bodyDigest, receivedAt: input.receivedAt,
      type: event.type, messageId: event.messageId ?? null, dedupeKey: event.dedupeKey,
      status: event.status?.value ?? null, statusRank: event.status?.rank ?? null, statusFinal: event.status?.final ?? null,
      sequence: event.sequence ?? null, body, defaultMaxAgeSeconds,
    });
    return rows[0]!;
  });
  // withDeliveryIds only returns once the call had enough ids, i.e. once it wrote.
  const outcome = row.outcome as IntakeOutcome;
  return { outcome, receiptId, eventId: row.event_id, fanOut: { pending: row.pending, deadDisabled: row.dead_disabled } };
}

interface IntakeRow {
  outcome: IntakeOutcome | 'need_ids';
  event_id: string;
  endpoint_count: number;
  pending: number;
  dead_disabled: number;
}
