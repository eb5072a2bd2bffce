import type { Knex } from 'knex';
import { newEndpointDestination, setEndpointStatus, type EndpointStatusChange } from '../delivery/index.js';
import type { EndpointTls } from '../domain/endpoint-tls.js';
import type { EndpointStatus } from '../domain/endpoints.js';
import { idOfUuid, newId, uuidOf, uuidOfId } from '../domain/ids.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { SignatureScheme } from '../domain/signing.js';
import { audit, recordAudit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';
import type { TenantScope } from './tenant-scope.js';

export interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  description: string | null;
  event_types: string[];
  status: EndpointStatus;
  disabled_reason: string | null;
  paused_at: Date | null;
  max_concurrency: number;
  rate_limit_per_second: number | null;
  retry_policy: Record<string, number>;
  ordering: 'none' | 'per-message';
  /** `hmac`: secret_enc holds a `whsec_` secret; `ed25519`: a `whsk_` private key. Fixed at creation. */
  signature_scheme: SignatureScheme;
  secret_enc: string;
  previous_secret_enc: string | null;
  previous_secret_expires_at: Date | null;
  consecutive_failures: number;
  circuit_open_until: Date | null;
  failing_since: Date | null;
  failure_warned_percent: number | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
  /** The endpoint's own request headers, a JSON object sealed with the SecretBox (bound to the id). */
  headers_enc: string | null;
  /** Mutual TLS settings (domain/endpoint-tls.ts) as JSON sealed like headers_enc; never returned. */
  tls_enc: string | null;
  /** The content filter as the tenant wrote it, and compiled (src/domain/event-filter.ts). */
  filter: string | null;
  filter_path: string | null;
  /** Requests to the endpoint carry a W3C `traceparent` (migration 20261202000038). */
  propagate_trace_context: boolean;
  /** When held work was last let go (src/delivery/endpoint-health.ts); read by src/domain/slo.ts. */
  released_at: Date | null;
}

export interface EndpointInput {
  url?: string;
  eventTypes?: string[];
  description?: string | null;
  maxConcurrency?: number;
  rateLimitPerSecond?: number | null;
  retryPolicy?: Record<string, number | undefined>;
  ordering?: 'none' | 'per-message';
  status?: EndpointStatus;
  /** Why the status changes (a pause's reason, say), for the audit entry and the operational event. */
  statusReason?: string;
  /** Replaces every header; null or {} removes them. Validated (src/domain/endpoint-headers.ts). */
  headers?: Record<string, string> | null;
  /** The filter's text and its compiled jsonpath; null removes it. */
  filter?: { text: string; path: string } | null;
  /** Replaces the mutual TLS settings; null removes them. Validated (src/domain/endpoint-tls.ts). */
  tls?: EndpointTls | null;
  /** Only at creation: the scheme never changes afterwards (see docs/security.md). */
  signature?: { scheme: SignatureScheme };
  propagateTraceContext?: boolean;
}

/** An endpoint as updated, and its status change (for the operational event) when there was one. */
export interface UpdatedEndpoint {
  row: EndpointRow;
  statusChange: EndpointStatusChange | null;
}

/**
 * An endpoints row as the platform uses it: the table stores the id as the uuid its TypeID encodes
 * (migration 20261206000052), and everything above the stores, the secret box's binding included,
 * uses the TypeID.
 */
export function endpointFromDb<R extends { id: string }>(row: R): R;
export function endpointFromDb<R extends { id: string }>(row: R | undefined): R | undefined;
export function endpointFromDb<R extends { id: string }>(row: R | undefined): R | undefined {
  return row && { ...row, id: idOfUuid('endpoint', row.id) };
}

/** The sealed form of a headers object, or null for none. */
function sealHeaders(box: SecretBox, id: string, headers: Record<string, string> | null | undefined): string | null {
  return headers && Object.keys(headers).length > 0 ? box.seal(JSON.stringify(headers), id) : null;
}

/** The sealed form of the TLS settings, or null for none. */
function sealTls(box: SecretBox, id: string, tls: EndpointTls | null | undefined): string | null {
  return tls ? box.seal(JSON.stringify(tls), id) : null;
}

/** What an attempt needs beyond the claim, sealed: an endpoint's own headers and TLS settings. */
export type SealedAttemptSettings = Pick<
  EndpointRow,
  'id' | 'headers_enc' | 'tls_enc' | 'propagate_trace_context' | 'released_at' | 'consecutive_failures' | 'circuit_open_until'
>;

/** The sealed attempt settings of an endpoint, deleted or not: the worker reads them for its attempts. */
export async function readSealedAttemptSettings(scope: TenantScope, id: string): Promise<SealedAttemptSettings | undefined> {
  const row: SealedAttemptSettings | undefined = await scope.from('endpoints').where('endpoints.id', uuidOf('endpoint', id)).first(
      'endpoints.id',
      'endpoints.headers_enc',
      'endpoints.tls_enc',
      'endpoints.propagate_trace_context',
      'endpoints.released_at',
      'endpoints.consecutive_failures',
      'endpoints.circuit_open_until',
    );
  return endpointFromDb(row);
}

/** The endpoint's mutual TLS settings, opened; null when it has none. */
export function openTls(box: SecretBox, row: Pick<EndpointRow, 'id' | 'tls_enc'>): EndpointTls | null {
  return row.tls_enc === null ? null : (JSON.parse(box.open(row.tls_enc, row.id)) as EndpointTls);
}

/** The endpoint's own request headers, opened. */
export function openHeaders(box: SecretBox, row: Pick<EndpointRow, 'id' | 'headers_enc'>): Record<string, string> {
  return row.headers_enc === null ? {} : (JSON.parse(box.open(row.headers_enc, row.id)) as Record<string, string>);
}

/** How long a rotated-out secret keeps signing beside the new one. */
export const secretOverlapMs = 24 * 60 * 60 * 1000;

export function rowToEndpoint(row: EndpointRow) {
  return {
    id: row.id,
    url: row.url,
    description: row.description,
    eventTypes: row.event_types,
    status: row.status,
    disabledReason: row.disabled_reason,
    maxConcurrency: row.max_concurrency,
    rateLimitPerSecond: row.rate_limit_per_second,
    retryPolicy: row.retry_policy,
    ordering: row.ordering,
    propagateTraceContext: row.propagate_trace_context,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const live = (scope: TenantScope) => scope.from('endpoints').whereNull('endpoints.deleted_at');

export async function getEndpoint(scope: TenantScope, id: string): Promise<EndpointRow | undefined> {
  const key = uuidOfId('endpoint', id);
  return key === null ? undefined : endpointFromDb(await live(scope).where('endpoints.id', key).first());
}

/** A page of the scope's live endpoints, newest first. */
export function listEndpoints(scope: TenantScope, page: { limit: number; cursor?: string }): Promise<Page<EndpointRow>> {
  return paginate(live(scope).select('endpoints.*'), 'endpoints.id', page, (r: EndpointRow) => endpointFromDb(r), 'endpoint');
}

export async function insertEndpoint(
  scope: TenantScope,
  box: SecretBox,
  input: EndpointInput & { url: string },
  secret: string,
  defaultConcurrency: number,
): Promise<EndpointRow> {
  const id = newId('endpoint');
  return scope.transaction(async (s) => {
    const [row] = await s
      .insert('endpoints', {
        id: uuidOf('endpoint', id),
        url: input.url,
        description: input.description ?? null,
        event_types: input.eventTypes ?? [],
        max_concurrency: input.maxConcurrency ?? defaultConcurrency,
        rate_limit_per_second: input.rateLimitPerSecond ?? null,
        retry_policy: JSON.stringify(input.retryPolicy ?? {}),
        ordering: input.ordering ?? 'none',
        signature_scheme: input.signature?.scheme ?? 'hmac',
        secret_enc: box.seal(secret, id),
        headers_enc: sealHeaders(box, id, input.headers),
        tls_enc: sealTls(box, id, input.tls),
        filter: input.filter?.text ?? null,
        filter_path: input.filter?.path ?? null,
        propagate_trace_context: input.propagateTraceContext ?? false,
      })
      .returning('*');
    await audit(s, { action: 'endpoint.created', targetType: 'endpoint', targetId: id, details: { url: input.url } });
    return endpointFromDb(row as EndpointRow);
  });
}

/**
 * An endpoint column's value for the audit log: dates as ISO text, and the sealed headers and TLS settings as only
 * whether there are any. (URLs never carry credentials: they are refused.)
 */
const auditValue = (column: string, value: unknown): unknown =>
  column === 'headers_enc' || column === 'tls_enc' ? value !== null : value instanceof Date ? value.toISOString() : value;

export async function updateEndpoint(scope: TenantScope, box: SecretBox, id: string, input: EndpointInput): Promise<UpdatedEndpoint | undefined> {
  const key = uuidOfId('endpoint', id);
  if (key === null) return undefined;
  return scope.transactionWithPlatformDb(async (s, trx) => {
    const current = endpointFromDb<EndpointRow>(await live(s).where('endpoints.id', key).forUpdate().first());
    if (!current) return undefined;
    const changes: Record<string, unknown> = { updated_at: trx.fn.now() };
    if (input.url !== undefined && input.url !== current.url) changes.url = input.url;
    if (input.eventTypes !== undefined) changes.event_types = input.eventTypes;
    if (input.description !== undefined) changes.description = input.description;
    if (input.maxConcurrency !== undefined) changes.max_concurrency = input.maxConcurrency;
    if (input.rateLimitPerSecond !== undefined) changes.rate_limit_per_second = input.rateLimitPerSecond;
    if (input.retryPolicy !== undefined) changes.retry_policy = JSON.stringify(input.retryPolicy);
    if (input.ordering !== undefined) changes.ordering = input.ordering;
    if (input.headers !== undefined) changes.headers_enc = sealHeaders(box, id, input.headers);
    if (input.tls !== undefined) changes.tls_enc = sealTls(box, id, input.tls);
    if (input.propagateTraceContext !== undefined) changes.propagate_trace_context = input.propagateTraceContext;
    if (input.filter !== undefined) {
      changes.filter = input.filter?.text ?? null;
      changes.filter_path = input.filter?.path ?? null;
    }
    // The status and the circuit are endpoint health's to write (src/delivery/endpoint-health.ts); the audit entry is this update's.
    const reason = input.statusReason ?? (input.status === 'disabled' ? 'disabled by the tenant' : null);
    const statusChange = input.status === undefined ? null : await setEndpointStatus(trx, current, input.status, reason);
    if (changes.url !== undefined) await newEndpointDestination(trx, id);
    const row = endpointFromDb<EndpointRow>((await trx('endpoints').where({ id: key }).update(changes).returning('*'))[0]);
    const { updated_at: _, ...fields } = changes;
    const changed = { ...fields, ...(statusChange && { status: true, disabled_reason: true }) };
    // Read from the rows, not the request, so values are as stored (retry_policy as an object, not its JSON text).
    const valuesIn = (source: Record<string, unknown>) => Object.fromEntries(Object.keys(changed).map((column) => [column, auditValue(column, source[column])]));
    const before = valuesIn(current as unknown as Record<string, unknown>);
    const after = valuesIn(row as unknown as Record<string, unknown>);
    await recordAudit(trx, {
      tenantId: s.tenantId,
      actor: s.actor,
      action: statusChange ? `endpoint.${statusChange}` : 'endpoint.updated',
      targetType: 'endpoint',
      targetId: id,
      reason: input.statusReason,
      details: { changed: Object.keys(changed), before, after },
    });
    return { row, statusChange };
  });
}

/**
 * Deletes (soft) an endpoint, with `deadLetterWaiting` (the lifecycle's transition, which calls
 * this) in the same transaction; answers how many deliveries that dead-lettered, or null if there
 * was no such endpoint.
 */
export async function deleteEndpoint(
  scope: TenantScope,
  id: string,
  deadLetterWaiting: (trx: Knex.Transaction, endpointId: string) => Promise<number>,
): Promise<{ deadLettered: number } | null> {
  const key = uuidOfId('endpoint', id);
  if (key === null) return null;
  return scope.transactionWithPlatformDb(async (s, trx) => {
    const count = await live(s).where('endpoints.id', key).update({ deleted_at: trx.fn.now(), updated_at: trx.fn.now() });
    if (count === 0) return null;
    const deadLettered = await deadLetterWaiting(trx, id);
    await recordAudit(trx, { tenantId: s.tenantId, actor: s.actor, action: 'endpoint.deleted', targetType: 'endpoint', targetId: id });
    return { deadLettered };
  });
}

/**
 * Replaces the signing secret with `newSecret(scheme)` (a secret of the endpoint's own scheme);
 * answers the endpoint's scheme, the new secret and until when the previous one keeps signing, or
 * undefined when there is no such endpoint.
 */
export async function rotateEndpointSecret(
  scope: TenantScope,
  box: SecretBox,
  id: string,
  newSecretFor: (scheme: SignatureScheme) => string,
): Promise<{ scheme: SignatureScheme; secret: string; previousSecretExpiresAt: Date } | undefined> {
  const key = uuidOfId('endpoint', id);
  if (key === null) return undefined;
  return scope.transaction(async (s) => {
    const current = endpointFromDb<EndpointRow>(await live(s).where('endpoints.id', key).forUpdate().first());
    if (!current) return undefined;
    const newSecret = newSecretFor(current.signature_scheme);
    const previousSecretExpiresAt = new Date(Date.now() + secretOverlapMs);
    await live(s)
      .where('endpoints.id', key)
      .update({
        secret_enc: box.seal(newSecret, id),
        previous_secret_enc: current.secret_enc,
        previous_secret_expires_at: previousSecretExpiresAt,
        updated_at: s.now(),
      });
    await audit(s, { action: 'endpoint.secret_rotated', targetType: 'endpoint', targetId: id });
    return { scheme: current.signature_scheme, secret: newSecret, previousSecretExpiresAt };
  });
}

type SecretColumns = Pick<EndpointRow, 'id' | 'secret_enc' | 'previous_secret_enc' | 'previous_secret_expires_at'>;

/** Whether a rotated-out secret still signs beside the current one (its overlap has not ended). */
function previousSecretSigns(row: SecretColumns, now: Date): boolean {
  return row.previous_secret_enc !== null && row.previous_secret_expires_at !== null && row.previous_secret_expires_at > now;
}

/** The secrets that sign a request now: the current one, plus the previous one during its overlap. */
export function signingSecrets(box: SecretBox, row: SecretColumns, now = new Date()): string[] {
  const secrets = [box.open(row.secret_enc, row.id)];
  if (previousSecretSigns(row, now)) secrets.push(box.open(row.previous_secret_enc!, row.id));
  return secrets;
}

/**
 * The endpoint's current signing secret and, while a rotated-out secret still signs beside it, until
 * when; undefined when there is no such endpoint. Audited (who and when, never the value): reading a
 * secret is as sensitive as rotating it.
 */
export async function revealEndpointSecret(
  scope: TenantScope,
  box: SecretBox,
  id: string,
  now = new Date(),
): Promise<{ scheme: SignatureScheme; secret: string; previousSecretExpiresAt: Date | null } | undefined> {
  const key = uuidOfId('endpoint', id);
  if (key === null) return undefined;
  return scope.transaction(async (s) => {
    const row = endpointFromDb<EndpointRow>(await live(s).where('endpoints.id', key).first());
    if (!row) return undefined;
    await audit(s, { action: 'endpoint.secret_revealed', targetType: 'endpoint', targetId: id });
    return {
      scheme: row.signature_scheme,
      secret: box.open(row.secret_enc, row.id),
      previousSecretExpiresAt: previousSecretSigns(row, now) ? row.previous_secret_expires_at : null,
    };
  });
}
