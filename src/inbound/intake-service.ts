import type { Knex } from 'knex';
import { digestHex } from '../domain/dedupe.js';
import { AppError, notFound } from '../domain/errors.js';
import type { SecretBox } from '../domain/secret-box.js';
import { isStorageUnavailable } from '../infra/db.js';
import { RecentSet } from '../domain/recent.js';
import type { FanOutResult } from '../domain/fan-out.js';
import { IntakeWriter, type IntakeRecord, type SourceRef } from '../store/intake-store.js';
import { findSourceForIntake, verificationSecrets, type IntakeSourceRow } from '../store/sources-store.js';
import type { InboundAdapter, InboundRequest } from './adapter.js';
import type { ParsedEvent } from '../domain/events.js';
import type { SourceType } from '../domain/sources.js';
import { adapterForSource } from './adapters/index.js';
import { verifyWithAny } from './verify-any.js';
import { startAccept } from '../infra/accept-spans.js';
import { failSpan, startSpan, type Span } from '../infra/tracing.js';

export interface IntakeDeps {
  db: Knex;
  box: SecretBox;
  defaultMaxAgeSeconds: number;
  /** Group commit: callbacks per statement, statements in flight at once (INTAKE_BATCH_MAX, INTAKE_STATEMENTS_IN_FLIGHT). */
  batching?: { maxBatch: number; maxInFlight: number };
  /** Accounts for what fan-out created (dead letters, a wake-up for the dispatcher); see DeliveryLifecycle. */
  fannedOut: (result: FanOutResult) => void;
}

interface CachedSource {
  row: IntakeSourceRow;
  adapter: InboundAdapter;
  secret: string;
  /** A replaced secret, accepted until its own expiry even while this entry is still cached. */
  previous?: { secret: string; expiresAt: number };
  expiresAt: number;
}

const sourceCacheMs = 30_000;
/**
 * Bodies this process took recently, by source and digest, bounded so the memory stays small (see
 * docs/performance.md, "Memory"): a provider retry storm repeats the same few bodies within
 * seconds, and each repeat recognised here skips the parse and the accept statement.
 */
const recentBodiesKept = 10_000;

/** What a rejection or an outage tells the provider; the route turns it into the HTTP answer. */
export class IntakeError extends AppError {
  constructor(
    status: number,
    code: string,
    message: string,
    readonly outcome: 'rejected_signature' | 'rejected_malformed' | 'unavailable',
    headers: Record<string, string> = {},
  ) {
    super(status, code, message, headers);
  }
}

/**
 * The inbound path shared by every provider: verify the exact bytes, answer byte-identical repeats
 * cheaply, parse, and store the receipt, event, message status and deliveries in one statement.
 *
 * A byte-identical repeat is recognised twice over. A body this process took recently goes to the
 * receipt-only statement without being parsed (the cheap path of a retry storm). Any other body is
 * parsed and goes to the accept statement, where a repeat meets the first copy on its dedupe key (a
 * key is a function of the bytes; migration 20261202000027), so a new callback costs one round trip
 * and a repeat that another process took, or that this one has forgotten, is still answered with
 * its stored event.
 */
export class IntakeService {
  private readonly sources = new Map<string, CachedSource>();
  private readonly recentBodies = new RecentSet(recentBodiesKept);
  private readonly writer: IntakeWriter;

  constructor(private readonly deps: IntakeDeps) {
    this.writer = new IntakeWriter(deps.db, deps.defaultMaxAgeSeconds, deps.batching);
  }

  async sourceType(sourceId: string): Promise<SourceType> {
    return this.cachedSourceType(sourceId) ?? (await this.loadSource(sourceId)).row.type;
  }

  /** Without a promise, for the per-request metrics hook: every callback that got far enough is cached. */
  cachedSourceType(sourceId: string): SourceType | undefined {
    // A source's type never changes, so even an expired entry answers: during a database outage
    // the 503s must still be counted under their source type.
    return this.sources.get(sourceId)?.row.type;
  }

  /** `span`: the request's, when it is traced; verify and accept are its children. */
  async receive(sourceId: string, request: InboundRequest, span?: Span): Promise<IntakeRecord> {
    const { row, adapter, secret, previous } = await this.loadSource(sourceId);
    const verifying = startSpan('webhook.verify', { parent: span, attributes: { 'webhook.source_id': row.id, 'webhook.source_type': row.type } });
    const verified = verifyWithAny(adapter, request, previous && previous.expiresAt > Date.now() ? [secret, previous.secret] : [secret]);
    verifying?.setAttribute('webhook.verify.result', verified.ok ? 'valid' : verified.reason);
    if (!verified.ok) failSpan(verifying, verified.message, verified.reason);
    verifying?.end();
    if (!verified.ok) throw new IntakeError(401, verified.reason, verified.message, 'rejected_signature');
    const bodyDigest = adapter.repeatDigest?.(request) ?? digestHex(request.rawBody);
    const source = { id: row.id, tenantId: row.tenantId };
    const bodyKey = `${row.id} ${bodyDigest}`;
    if (this.recentBodies.has(bodyKey)) {
      const repeat = await this.guard(() => this.writer.recordDigestDuplicate(source, bodyDigest, 'callback'));
      // Nothing found: the first receipt has left with its retention window; take it as new.
      if (repeat) return repeat;
    }
    const parsed = adapter.parse(request);
    if (!parsed.ok) throw new IntakeError(400, parsed.code, parsed.message, 'rejected_malformed');
    const record = await this.accept(source, parsed.event, bodyDigest, 'callback', request.now, span);
    this.recentBodies.add(bodyKey);
    return record;
  }

  /** Also the entry point of reconciliation, which learns events by polling instead of by callback. */
  async accept(
    source: SourceRef,
    event: ParsedEvent,
    bodyDigest: string,
    origin: 'callback' | 'reconcile',
    receivedAt: Date,
    span?: Span,
  ): Promise<IntakeRecord> {
    const spans = startAccept({ 'webhook.source_id': source.id, 'webhook.origin': origin }, span);
    try {
      const record = await this.guard(() =>
        this.writer.recordCallback({ source, origin, bodyDigest, event, receivedAt, traceParent: spans?.traceParent ?? null }),
      );
      spans?.stored({ ...record.fanOut, outcome: record.outcome, eventId: record.eventId, receiptId: record.receiptId, messageId: event.messageId });
      this.deps.fannedOut(record.fanOut);
      return record;
    } catch (err) {
      spans?.failed(err);
      throw err;
    }
  }

  /**
   * Drops what this process cached about a source after the tenant changed or deleted it, so this
   * process applies the change at once; other processes follow when their entry expires.
   */
  forgetSource(sourceId: string): void {
    this.sources.delete(sourceId);
  }

  private async loadSource(sourceId: string): Promise<CachedSource> {
    const cached = this.sources.get(sourceId);
    if (cached && cached.expiresAt > Date.now()) return cached;
    if (!/^src_[0-9a-z]{26}$/.test(sourceId)) throw notFound('source');
    const row = await this.guard(() => findSourceForIntake(this.deps.db, sourceId));
    if (!row) throw notFound('source');
    const { current, previous } = verificationSecrets(row, this.deps.box);
    const adapter = adapterForSource({ type: row.type, hmacConfig: row.hmac_config });
    const entry = { row, adapter, secret: current, ...(previous && { previous }), expiresAt: Date.now() + sourceCacheMs };
    this.sources.set(sourceId, entry);
    return entry;
  }

  private async guard<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof AppError) throw err;
      if (isStorageUnavailable(err)) {
        throw new IntakeError(503, 'unavailable', 'storage is unavailable; retry later', 'unavailable', { 'retry-after': '5' });
      }
      throw err;
    }
  }
}

