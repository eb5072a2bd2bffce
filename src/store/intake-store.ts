import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import type { ParsedEvent } from '../inbound/adapter.js';
import { fanOut, type FanOutResult } from './fan-out.js';

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
  const { rows } = await db.raw<{ rows: Array<{ event_id: string }> }>(
    `INSERT INTO receipts (id, tenant_id, source_id, event_id, outcome, origin, body_digest)
     SELECT ?, ?, ?, r.event_id, 'duplicate', ?, ?
       FROM (SELECT event_id FROM receipts WHERE source_id = ? AND body_digest = ? LIMIT 1) r
     RETURNING event_id`,
    [receiptId, source.tenantId, source.id, origin, bodyDigest, source.id, bodyDigest],
  );
  const row = rows[0];
  return row ? { outcome: 'duplicate', receiptId, eventId: row.event_id, fanOut: none } : undefined;
}

/**
 * Accepting a callback is one transaction: the event (unique on source + dedupe key), the message's
 * forward-only status, one delivery per matching endpoint, and the receipt. Nothing is acknowledged
 * before it commits.
 */
export async function recordCallback(db: Knex, input: CallbackInput, defaultMaxAgeSeconds: number): Promise<IntakeRecord> {
  const { source, event } = input;
  const receiptId = newId('receipt');
  return db.transaction(async (trx) => {
    const candidateId = newId('event');
    const status = event.status;
    const { rows } = await trx.raw<{ rows: Array<{ event_id: string | null; seq: number | null; advanced: number }> }>(
      `WITH ev AS (
         INSERT INTO events (id, tenant_id, source_id, origin, type, message_id, dedupe_key, status, status_rank,
                             provider_sequence, body, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (source_id, dedupe_key) DO NOTHING
         RETURNING id, seq
       ), msg AS (
         INSERT INTO messages AS m (tenant_id, source_id, message_id, status, status_rank, status_final, last_event_id, updated_at)
         SELECT ?, ?, ?, ?, ?, ?, ev.id, now() FROM ev WHERE ?::text IS NOT NULL
         ON CONFLICT ON CONSTRAINT messages_identity DO UPDATE
            SET status = COALESCE(EXCLUDED.status, m.status),
                status_rank = GREATEST(EXCLUDED.status_rank, m.status_rank),
                status_final = CASE WHEN EXCLUDED.status IS NULL THEN m.status_final ELSE EXCLUDED.status_final END,
                last_event_id = EXCLUDED.last_event_id,
                updated_at = now()
          WHERE EXCLUDED.status IS NULL OR m.status_rank < EXCLUDED.status_rank
         RETURNING 1
       )
       SELECT (SELECT id FROM ev) AS event_id, (SELECT seq FROM ev) AS seq, (SELECT count(*) FROM msg)::int AS advanced`,
      [
        candidateId, source.tenantId, source.id, input.origin, event.type, event.messageId ?? null, event.dedupeKey,
        status?.value ?? null, status?.rank ?? null, event.sequence ?? null,
        outboundBody(candidateId, event.type, input.receivedAt, event.messageId, event.data), input.receivedAt,
        source.tenantId, source.id, event.messageId ?? null, status?.value ?? null, status?.rank ?? 0, status?.final ?? false,
        event.messageId ?? null,
      ],
    );
    const inserted = rows[0]?.event_id ?? null;
    let outcome: IntakeOutcome;
    let eventId: string;
    let fan = none;
    if (!inserted) {
      outcome = 'duplicate';
      const existing = await trx('events').where({ source_id: source.id, dedupe_key: event.dedupeKey }).first('id');
      eventId = existing.id;
    } else if (status && event.messageId && rows[0]!.advanced === 0) {
      // Older than what the message already reached: kept as evidence, forwarded to nobody.
      outcome = 'stale';
      eventId = inserted;
      await trx('events').where({ id: inserted }).update({ stale: true });
    } else {
      outcome = 'accepted';
      eventId = inserted;
      fan = await fanOut(
        trx,
        {
          id: inserted,
          tenantId: source.tenantId,
          type: event.type,
          createdAt: input.receivedAt,
          seq: rows[0]!.seq!,
          messageKey: event.messageId ? `${source.id}:${event.messageId}` : null,
          providerSequence: event.sequence ?? null,
        },
        defaultMaxAgeSeconds,
      );
    }
    await trx('receipts').insert({
      id: receiptId,
      tenant_id: source.tenantId,
      source_id: source.id,
      event_id: eventId,
      outcome,
      origin: input.origin,
      body_digest: input.bodyDigest,
      received_at: input.receivedAt,
    });
    return { outcome, receiptId, eventId, fanOut: fan };
  });
}
