import type { Knex } from 'knex';
import type { EndpointTls } from '../domain/endpoint-tls.js';
import type { SecretBox } from '../domain/secret-box.js';
import { RecentMap } from '../domain/recent.js';
import type { HeldState } from '../domain/slo.js';
import { openHeaders, openTls, readSealedAttemptSettings } from '../store/endpoints-store.js';
import { TenantScope } from '../store/tenant-scope.js';

/**
 * What the cache reads of an endpoint: its id (the seals are bound to it), its sealed headers and
 * its sealed TLS settings (absent is read as none).
 */
export interface SealedHeaders {
  id: string;
  headers_enc: string | null;
  tls_enc?: string | null;
  propagate_trace_context?: boolean;
  released_at?: Date | null;
  consecutive_failures?: number;
  circuit_open_until?: Date | null;
}

export interface EndpointHeadersOptions {
  box: SecretBox;
  /** Reads the endpoint's sealed settings; undefined when it is gone. */
  read: (tenantId: string, endpointId: string) => Promise<SealedHeaders | undefined>;
  /** How long an answer is used before the endpoint is read again: a change applies within it. */
  freshMs?: number;
  /** How often at most settingsAsOf reads one endpoint; every caller waiting shares the next read. */
  asOfGapMs?: number;
  capacity?: number;
  now?: () => number;
}

/** An endpoint's own settings for its attempts, beyond what the claim carries. */
export interface AttemptSettings {
  headers: Record<string, string>;
  /** Mutual TLS, with its sealed text as the version: a PATCH seals anew, so a change is a new version. */
  tls: { config: EndpointTls; version: string } | null;
  /** The endpoint asked for a `traceparent` on its requests. */
  propagateTraceContext: boolean;
  /** Whether it holds its work back, for the latency objective (src/domain/slo.ts). */
  held: HeldState;
}

interface Entry {
  readAt: number;
  sealedHeaders: string | null;
  sealedTls: string | null;
  settings: AttemptSettings;
}

/**
 * An endpoint's own request headers and TLS settings for its attempts. The claim does not carry
 * them (its columns are the SQL functions' results); instead each endpoint is read at most once
 * per `freshMs`, and opened only when its sealed form changed, so a busy endpoint costs one small
 * read a second, not one decryption per attempt.
 */
export class EndpointHeaders {
  private readonly entries: RecentMap<Entry>;
  private readonly reading = new Map<string, { startedAt: number; settings: Promise<AttemptSettings> }>();
  /** Reads settingsAsOf has scheduled and not started, with the latest time a caller asked for. */
  private readonly waiting = new Map<string, { sinceMs: number; settings: Promise<AttemptSettings> }>();
  private readonly freshMs: number;
  private readonly asOfGapMs: number;
  private readonly now: () => number;

  constructor(private readonly options: EndpointHeadersOptions) {
    this.entries = new RecentMap(options.capacity ?? 10_000);
    this.freshMs = options.freshMs ?? 1_000;
    this.asOfGapMs = options.asOfGapMs ?? 250;
    this.now = options.now ?? Date.now;
  }

  async of(tenantId: string, endpointId: string): Promise<Record<string, string>> {
    return (await this.settings(tenantId, endpointId)).headers;
  }

  /** The settings as read within the last `freshMs`; concurrent callers share one read. */
  async settings(tenantId: string, endpointId: string): Promise<AttemptSettings> {
    const now = this.now();
    const known = this.entries.get(endpointId);
    if (known && now - known.readAt < this.freshMs) return known.settings;
    return this.reading.get(endpointId)?.settings ?? this.startRead(tenantId, endpointId, now, known);
  }

  /**
   * The settings as read at or after `sinceMs`, for a decision that must not use a state older than
   * something it saw and that can wait for it. Such reads start at most once per `asOfGapMs` per
   * endpoint, each shared by every caller waiting then: during a backlog's drain every first attempt
   * asks (docs/performance.md, "Late attempts' objective reads, off the slot's path").
   */
  settingsAsOf(tenantId: string, endpointId: string, sinceMs: number): Promise<AttemptSettings> {
    const started = this.startedSince(endpointId, sinceMs);
    if (started) return started;
    const waiting = this.waiting.get(endpointId);
    if (waiting) {
      waiting.sinceMs = Math.max(waiting.sinceMs, sinceMs);
      return waiting.settings;
    }
    const now = this.now();
    const known = this.entries.get(endpointId);
    const lastStartMs = Math.max(known?.readAt ?? -Infinity, this.reading.get(endpointId)?.startedAt ?? -Infinity);
    const waitMs = Math.max(sinceMs - now, lastStartMs + this.asOfGapMs - now);
    if (waitMs <= 0) return this.startRead(tenantId, endpointId, now, known);
    const next = { sinceMs, settings: undefined as unknown as Promise<AttemptSettings> };
    // When it is due, a read starts whatever the clock says: time has passed for every caller.
    next.settings = new Promise<void>((resolve) => setTimeout(resolve, waitMs)).then(() => {
      this.waiting.delete(endpointId);
      return this.startedSince(endpointId, next.sinceMs) ?? this.startRead(tenantId, endpointId, this.now(), this.entries.get(endpointId));
    });
    this.waiting.set(endpointId, next);
    return next.settings;
  }

  /** A read of the endpoint that started at or after `sinceMs`, done or still in flight. */
  private startedSince(endpointId: string, sinceMs: number): Promise<AttemptSettings> | undefined {
    const known = this.entries.get(endpointId);
    if (known && known.readAt >= sinceMs) return Promise.resolve(known.settings);
    const reading = this.reading.get(endpointId);
    return reading && reading.startedAt >= sinceMs ? reading.settings : undefined;
  }

  private startRead(tenantId: string, endpointId: string, now: number, known: Entry | undefined): Promise<AttemptSettings> {
    const settings = this.read(tenantId, endpointId, now, known).finally(() => {
      if (this.reading.get(endpointId)?.settings === settings) this.reading.delete(endpointId);
    });
    this.reading.set(endpointId, { startedAt: now, settings });
    return settings;
  }

  private async read(tenantId: string, endpointId: string, now: number, known: Entry | undefined): Promise<AttemptSettings> {
    const row = await this.options.read(tenantId, endpointId);
    const sealedHeaders = row?.headers_enc ?? null;
    const sealedTls = row?.tls_enc ?? null;
    const { box } = this.options;
    const headers = known && known.sealedHeaders === sealedHeaders ? known.settings.headers : openHeaders(box, { id: endpointId, headers_enc: sealedHeaders });
    const tls =
      known && known.sealedTls === sealedTls
        ? known.settings.tls
        : sealedTls === null
          ? null
          : { config: openTls(box, { id: endpointId, tls_enc: sealedTls })!, version: sealedTls };
    const held = { releasedAt: row?.released_at ?? null, consecutiveFailures: row?.consecutive_failures ?? 0, circuitOpenUntil: row?.circuit_open_until ?? null };
    const settings = { headers, tls, propagateTraceContext: row?.propagate_trace_context ?? false, held };
    this.entries.set(endpointId, { readAt: now, sealedHeaders, sealedTls, settings });
    return settings;
  }
}

/** The worker's cache, reading each endpoint through its tenant's scope. */
export function endpointHeadersFrom(platformDb: Knex, box: SecretBox): EndpointHeaders {
  return new EndpointHeaders({ box, read: (tenantId, id) => readSealedAttemptSettings(TenantScope.forSystem(platformDb, tenantId), id) });
}
