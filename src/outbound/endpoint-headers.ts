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
  private readonly freshMs: number;
  private readonly now: () => number;

  constructor(private readonly options: EndpointHeadersOptions) {
    this.entries = new RecentMap(options.capacity ?? 10_000);
    this.freshMs = options.freshMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  async of(tenantId: string, endpointId: string): Promise<Record<string, string>> {
    return (await this.settings(tenantId, endpointId)).headers;
  }

  /**
   * `readSince`: an answer read at or after this time (ms), for a decision that must not use a
   * state older than something it saw; concurrent callers share one read.
   */
  async settings(tenantId: string, endpointId: string, readSince?: number): Promise<AttemptSettings> {
    const now = this.now();
    const known = this.entries.get(endpointId);
    if (known && now - known.readAt < this.freshMs && (readSince === undefined || known.readAt >= readSince)) return known.settings;
    const reading = this.reading.get(endpointId);
    if (reading && (readSince === undefined || reading.startedAt >= readSince)) return reading.settings;
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
