import type { Knex } from 'knex';
import type { FanOutResult } from '../domain/fan-out.js';
import { idOfUuid, newId, newStoredId, uuidOf } from '../domain/ids.js';
import { stringifyJson } from '../domain/raw-json.js';
import { Batcher } from '../infra/batcher.js';
import { mayBeOneRowsFault } from '../infra/db.js';
import { run, statement, type WarmUp } from '../infra/sql.js';
import type { IntakeOutcome, ParsedEvent } from '../domain/events.js';
import { withDeliveryIds } from './delivery-ids.js';
import { makeWarmUpTenant, warmUpId, warmUpSecret } from './warm-up-tenant.js';


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
  /** The event's fan-out span (src/infra/accept-spans.ts), stored with it; null when not traced. */
  traceParent?: string | null;
}

export interface IntakeRecord {
  outcome: IntakeOutcome;
  receiptId: string;
  eventId: string;
  fanOut: FanOutResult;
}

const none: FanOutResult = { pending: 0, deadDisabled: 0 };

/**
 * Writes callbacks with group commit (src/infra/batcher.ts): callbacks arriving while earlier ones
 * are being written go together in the next statement, so under load many share one round trip and
 * one commit. Each caller is answered only after the statement holding its callback has committed.
 */
export class IntakeWriter {
  private readonly repeats: Batcher<RepeatItem, string | undefined>;
  private readonly accepts: Batcher<AcceptItem, IntakeRow>;

  constructor(
    private readonly db: Knex,
    private readonly defaultMaxAgeSeconds: number,
    batching: { maxBatch: number; maxInFlight: number } = { maxBatch: 64, maxInFlight: 2 },
  ) {
    const shared = { ...batching, retryAlone: mayBeOneRowsFault };
    this.repeats = new Batcher({ ...shared, run: (items) => this.writeRepeats(items) });
    this.accepts = new Batcher({ ...shared, run: (items) => this.writeAccepts(items) });
  }

  /**
   * A byte-identical repeat of a body this source already sent is answered from the digest index,
   * without parsing or touching events: the cheap path of a provider retry storm, for bodies the
   * caller knows it took recently. Its receipt is still written, as durably as any other. Undefined
   * when no receipt has that digest.
   */
  async recordDigestDuplicate(source: SourceRef, bodyDigest: string, origin: 'callback' | 'reconcile'): Promise<IntakeRecord | undefined> {
    const receiptId = newId('receipt');
    const eventId = await this.repeats.submit({ receiptId, tenantId: source.tenantId, sourceId: source.id, origin, bodyDigest });
    return eventId ? { outcome: 'duplicate', receiptId, eventId, fanOut: none } : undefined;
  }

  /**
   * Accepting a callback is `intake_accept_many` (db/functions/intake_accept_many.sql) for a batch, one
   * statement and so one transaction without BEGIN/COMMIT round trips: the event (unique on source +
   * dedupe key), the message's forward-only status, one delivery per matching endpoint, and the
   * receipt. Nothing is acknowledged before it commits. A duplicate dedupe key (every byte-identical
   * repeat has one) answers with the stored event and creates no work; an event older than what its
   * message already reached is stored as stale evidence and forwarded to nobody.
   */
  async recordCallback(input: CallbackInput): Promise<IntakeRecord> {
    const { source, event } = input;
    const receiptId = newId('receipt');
    const eventKey = newStoredId();
    const eventId = idOfUuid('event', eventKey);
    const item: Omit<AcceptItem, 'deliveryIds'> = {
      receiptId, eventId: eventKey, envelopeId: eventId,
      tenantId: uuidOf('tenant', source.tenantId), sourceId: source.id, origin: input.origin, bodyDigest: input.bodyDigest, receivedAt: input.receivedAt,
      type: event.type, messageId: event.messageId ?? null, dedupeKey: event.dedupeKey,
      status: event.status?.value ?? null, statusRank: event.status?.rank ?? null, statusFinal: event.status?.final ?? null,
      sequence: event.sequence ?? null,
      data: stringifyJson(event.data),
      ...(input.traceParent && { traceParent: input.traceParent }),
    };
    const row = await withDeliveryIds(source.tenantId, event.type, (deliveryIds) => this.accepts.submit({ ...item, deliveryIds }));
    // withDeliveryIds only returns once the call had enough ids, i.e. once it wrote.
    // A duplicate's event is the first one's, read back as stored; an accepted one's is already named.
    const rowEventId = row.event_id === eventKey ? eventId : idOfUuid('event', row.event_id);
    return { outcome: row.outcome as IntakeOutcome, receiptId, eventId: rowEventId, fanOut: { pending: row.pending, deadDisabled: row.dead_disabled } };
  }

  private async writeRepeats(items: RepeatItem[]): Promise<Array<string | undefined>> {
    const rows = await run<{ id: string; event_id: string }>(this.db, repeatsStatement, {
      receiptIds: items.map((i) => i.receiptId),
      tenantIds: items.map((i) => uuidOf('tenant', i.tenantId)),
      sourceIds: items.map((i) => i.sourceId),
      origins: items.map((i) => i.origin),
      digests: items.map((i) => i.bodyDigest),
    });
    const byReceipt = new Map(rows.map((r) => [r.id, idOfUuid('event', r.event_id)]));
    return items.map((i) => byReceipt.get(i.receiptId));
  }

  private async writeAccepts(items: AcceptItem[]): Promise<IntakeRow[]> {
    return run<IntakeRow>(this.db, acceptsStatement, { items: JSON.stringify(items), defaultMaxAgeSeconds: this.defaultMaxAgeSeconds });
  }
}

interface RepeatItem {
  receiptId: string;
  tenantId: string;
  sourceId: string;
  origin: 'callback' | 'reconcile';
  bodyDigest: string;
}

/** One callback as intake_accept_many reads it (a JSON object with these keys). */
interface AcceptItem {
  receiptId: string;
  /** As stored: its uuid. */
  eventId: string;
  /** The event's TypeID, which its body names. */
  envelopeId: string;
  /** As stored (withDeliveryIds). */
  deliveryIds: string[];
  /** As stored: its uuid. */
  tenantId: string;
  sourceId: string;
  origin: 'callback' | 'reconcile';
  bodyDigest: string;
  receivedAt: Date;
  type: string;
  messageId: string | null;
  dedupeKey: string;
  status: string | null;
  statusRank: number | null;
  statusFinal: boolean | null;
  sequence: number | null;
  /** The payload's JSON text, absent when the event has none; the envelope is db/functions/event_body.sql's. */
  data?: string;
  /** Absent when the event is not traced, so an untraced batch's JSON is as before. */
  traceParent?: string;
}

interface IntakeRow {
  outcome: IntakeOutcome | 'need_ids';
  /** As stored (its uuid's text). */
  event_id: string;
  endpoint_count: number;
  pending: number;
  dead_disabled: number;
}

/** Receipts for repeats, against the event each digest's first receipt names (db/functions/intake_record_repeats.sql). */
const repeatsStatement = statement(
  'intake_repeats',
  'SELECT * FROM intake_record_repeats(:receiptIds::text[], :tenantIds::text[], :sourceIds::text[], :origins::text[], :digests::text[])',
);

const acceptsStatement = statement('intake_accept_many', 'SELECT * FROM intake_accept_many(:items::jsonb, :defaultMaxAgeSeconds::int)');

const warmUpSourceStatement = statement(
  'warm_up_source',
  "INSERT INTO sources (id, tenant_id, type, name, secret_enc) VALUES (:id, :tenantId::uuid, 'standard-webhooks', 'warm-up', :secret)",
);

/**
 * Intake's statements on callbacks from a source of the warm-up's own, of a tenant of its own
 * (makeWarmUpTenant), so that every statement of intake_accept_many runs: an empty batch returns
 * before them, and PL/pgSQL plans each when it first runs. One batch is decided each way a callback
 * can be (accepted with a message status, a key already taken, a status the message has passed,
 * too few delivery ids), then a byte-identical repeat of the first gets its receipt.
 */
export const warmIntake: WarmUp = async (run) => {
  const { tenantId, now } = await makeWarmUpTenant(run);
  const sourceId = idOfUuid('source', warmUpId());
  await run(warmUpSourceStatement, { id: sourceId, tenantId, secret: warmUpSecret });
  const callback = (dedupeKey: string, statusRank: number, deliveryIds: number): AcceptItem => {
    const eventId = newStoredId();
    return {
      receiptId: newId('receipt'), eventId, envelopeId: idOfUuid('event', eventId), deliveryIds: Array.from({ length: deliveryIds }, newStoredId),
      tenantId, sourceId, origin: 'callback', bodyDigest: `warm-up-${dedupeKey}`, receivedAt: now, type: 'warm_up.received', messageId: 'warm-up',
      dedupeKey, status: `rank-${statusRank}`, statusRank, statusFinal: false, sequence: statusRank, data: '{}',
    };
  };
  const items = [callback('a', 1, 1), callback('a', 1, 1), callback('b', 0, 1), callback('c', 2, 0)];
  const decided = await run<IntakeRow>(acceptsStatement, { items: JSON.stringify(items), defaultMaxAgeSeconds: 3_600 });
  const outcomes = decided.map((r) => `${r.outcome}:${r.pending}`);
  if (outcomes.join() !== 'accepted:1,duplicate:0,stale:0,need_ids:0') throw new Error(`warm-up: intake of its own callbacks answered ${outcomes.join()}`);
  const repeats = await run(repeatsStatement, {
    receiptIds: [newId('receipt')], tenantIds: [tenantId], sourceIds: [sourceId], origins: ['callback'], digests: [items[0]!.bodyDigest],
  });
  if (repeats.length !== 1) throw new Error(`warm-up: a repeat of its own callback got ${repeats.length} receipts`);
};
