import type { Knex } from 'knex';
import type { SecretBox } from '../domain/secret-box.js';
import { RecentMap } from '../infra/recent.js';
import { openHeaders, readSealedHeaders } from '../store/endpoints-store.js';
import { TenantScope } from '../store/tenant-scope.js';

/** What the cache reads of an endpoint: its id (the seal is bound to it) and its sealed headers. */
export interface SealedHeaders {
  id: string;
  headers_enc: string | null;
}

export interface EndpointHeadersOptions {
  box: SecretBox;
  /** Reads the endpoint's sealed headers; undefined when it is gone. */
  read: (tenantId: string, endpointId: string) => Promise<SealedHeaders | undefined>;
  /** How long an answer is used before the endpoint is read again: a change applies within it. */
  freshMs?: number;
  capacity?: number;
  now?: () => number;
}

interface Entry {
  readAt: number;
  sealed: string | null;
  headers: Record<string, string>;
}

/**
 * An endpoint's own request headers for its attempts. The claim does not carry them (its columns
 * are the SQL functions' results); instead each endpoint is read at most once per `freshMs`, and
 * opened and parsed only when its sealed form changed, so a busy endpoint costs one small read a
 * second, not one decryption per attempt.
 */
export class EndpointHeaders {
  private readonly entries: RecentMap<Entry>;
  private readonly freshMs: number;
  private readonly now: () => number;

  constructor(private readonly options: EndpointHeadersOptions) {
    this.entries = new RecentMap(options.capacity ?? 10_000);
    this.freshMs = options.freshMs ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  async of(tenantId: string, endpointId: string): Promise<Record<string, string>> {
    const now = this.now();
    const known = this.entries.get(endpointId);
    if (known && now - known.readAt < this.freshMs) return known.headers;
    const row = await this.options.read(tenantId, endpointId);
    const sealed = row?.headers_enc ?? null;
    const headers = known && known.sealed === sealed ? known.headers : openHeaders(this.options.box, { id: endpointId, headers_enc: sealed });
    this.entries.set(endpointId, { readAt: now, sealed, headers });
    return headers;
  }
}

/** The worker's cache, reading each endpoint through its tenant's scope. */
export function endpointHeadersFrom(platformDb: Knex, box: SecretBox): EndpointHeaders {
  return new EndpointHeaders({ box, read: (tenantId, id) => readSealedHeaders(TenantScope.forSystem(platformDb, tenantId), id) });
}
