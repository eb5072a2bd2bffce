import type { Knex } from 'knex';
import { idOfUuid, newId } from '../domain/ids.js';
import type { HmacSourceConfig } from '../domain/hmac-source.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { SourceType } from '../domain/sources.js';
import { audit } from './audit-store.js';
import type { TenantScope } from './tenant-scope.js';

export interface SourceRow {
  id: string;
  /** As stored: the uuid the tenant's TypeID encodes. */
  tenant_id: string;
  type: SourceType;
  name: string;
  secret_enc: string;
  reconcile_base_url: string | null;
  reconcile_api_key_enc: string | null;
  reconcile_after_seconds: number | null;
  previous_secret_enc: string | null;
  previous_secret_expires_at: Date | null;
  /** Only for type `hmac`: how its callbacks are signed (jsonb). */
  hmac_config: HmacSourceConfig | null;
  created_at: Date;
  updated_at: Date;
  deleted_at: Date | null;
}

export interface NewSource {
  type: SourceType;
  name: string;
  secret: string;
  reconcile?: { baseUrl: string; apiKey: string; afterSeconds?: number };
  hmac?: HmacSourceConfig;
}

export const defaultReconcileAfterSeconds = 300;

export async function insertSource(scope: TenantScope, box: SecretBox, input: NewSource): Promise<SourceRow> {
  const id = newId('source');
  return scope.transaction(async (s) => {
    const [row] = await s
      .insert('sources', {
        id,
        type: input.type,
        name: input.name,
        secret_enc: box.seal(input.secret, id),
        reconcile_base_url: input.reconcile?.baseUrl ?? null,
        reconcile_api_key_enc: input.reconcile ? box.seal(input.reconcile.apiKey, `${id}:reconcile`) : null,
        reconcile_after_seconds: input.reconcile ? (input.reconcile.afterSeconds ?? defaultReconcileAfterSeconds) : null,
        hmac_config: input.hmac ? JSON.stringify(input.hmac) : null,
      })
      .returning('*');
    await audit(s, {
      action: 'source.created',
      targetType: 'source',
      targetId: id,
      details: { type: input.type, name: input.name, reconcile: reconcileOf(row as SourceRow), ...(input.hmac && { hmac: input.hmac }) },
    });
    return row as SourceRow;
  });
}

/** Sources the tenant has not deleted: a deleted one is gone from the API, its events are not. */
const liveSources = (scope: TenantScope) => scope.from('sources').whereNull('sources.deleted_at');

/** The tenant's live sources; for paginate. */
export const listSourcesQuery = (scope: TenantScope) => liveSources(scope).select('sources.*');

export async function findSource(scope: TenantScope, id: string): Promise<SourceRow | undefined> {
  return liveSources(scope).where('sources.id', id).first();
}

/** A source as intake reads it, with its tenant's TypeID. */
export type IntakeSourceRow = SourceRow & { tenantId: string };

/** Unscoped on purpose: inbound callbacks carry no API key; the source's own secret authenticates them. */
export async function findSourceForIntake(platformDb: Knex, id: string): Promise<IntakeSourceRow | undefined> {
  const row = await platformDb<SourceRow>('sources').where({ id }).whereNull('deleted_at').first();
  return row && { ...row, tenantId: idOfUuid('tenant', row.tenant_id) };
}

/**
 * The secrets a callback may be signed with now: the current one, and the previous one until it
 * expires. The expiry is returned with it so a cache can stop trusting the old secret on time.
 */
export function verificationSecrets(row: SourceRow, box: SecretBox): { current: string; previous?: { secret: string; expiresAt: number } } {
  const current = box.open(row.secret_enc, row.id);
  const expiresAt = row.previous_secret_expires_at?.getTime();
  if (row.previous_secret_enc === null || expiresAt === undefined || expiresAt <= Date.now()) return { current };
  return { current, previous: { secret: box.open(row.previous_secret_enc, row.id), expiresAt } };
}

/** How long a replaced secret keeps verifying: a provider's retries signed before the change still arrive. */
export const previousSecretGraceMs = 24 * 60 * 60 * 1000;

export interface SourceChanges {
  name?: string;
  secret?: string;
  reconcile?: { baseUrl: string; apiKey: string; afterSeconds?: number } | null;
}

/** What the audit log may show of a source's reconciliation: never its API key. */
const reconcileOf = (row: Pick<SourceRow, 'reconcile_base_url' | 'reconcile_after_seconds'>) =>
  row.reconcile_base_url === null ? null : { baseUrl: row.reconcile_base_url, afterSeconds: row.reconcile_after_seconds };

/**
 * Applies a PATCH. A new secret moves the current one to previous_secret_enc for 24 h (a second
 * change within that time drops the oldest). Audited with values before and after, except secrets,
 * of which only the fact of the change is recorded.
 */
export async function updateSource(scope: TenantScope, box: SecretBox, id: string, input: SourceChanges): Promise<SourceRow | undefined> {
  return scope.transaction(async (s) => {
    const current: SourceRow | undefined = await liveSources(s).where('sources.id', id).forUpdate().first();
    if (!current) return undefined;
    const changes: Record<string, unknown> = { updated_at: s.now() };
    const before: Record<string, unknown> = {};
    const after: Record<string, unknown> = {};
    if (input.name !== undefined) {
      changes.name = input.name;
      before.name = current.name;
      after.name = input.name;
    }
    if (input.secret !== undefined) {
      changes.secret_enc = box.seal(input.secret, id);
      changes.previous_secret_enc = current.secret_enc;
      changes.previous_secret_expires_at = new Date(Date.now() + previousSecretGraceMs);
    }
    if (input.reconcile !== undefined) {
      const r = input.reconcile;
      changes.reconcile_base_url = r?.baseUrl ?? null;
      changes.reconcile_api_key_enc = r ? box.seal(r.apiKey, `${id}:reconcile`) : null;
      changes.reconcile_after_seconds = r ? (r.afterSeconds ?? defaultReconcileAfterSeconds) : null;
      before.reconcile = reconcileOf(current);
      after.reconcile = r ? { baseUrl: r.baseUrl, afterSeconds: changes.reconcile_after_seconds } : null;
    }
    const [row] = (await liveSources(s).where('sources.id', id).update(changes).returning('*')) as SourceRow[];
    await audit(s, {
      action: 'source.updated',
      targetType: 'source',
      targetId: id,
      details: {
        changed: Object.keys(input).filter((field) => input[field as keyof SourceChanges] !== undefined),
        before,
        after,
        ...(input.secret !== undefined && { previousSecretExpiresAt: row!.previous_secret_expires_at!.toISOString() }),
      },
    });
    return row;
  });
}

/**
 * Soft delete: events and receipts reference their source (ON DELETE CASCADE), and they must stay
 * queryable, so the row stays and only stops answering callbacks and API calls.
 */
export async function deleteSource(scope: TenantScope, id: string): Promise<boolean> {
  return scope.transaction(async (s) => {
    const count = await liveSources(s).where('sources.id', id).update({ deleted_at: s.now(), updated_at: s.now() });
    if (count === 0) return false;
    await audit(s, { action: 'source.deleted', targetType: 'source', targetId: id });
    return true;
  });
}

export function rowToSource(row: SourceRow, publicBaseUrl: string) {
  return {
    id: row.id,
    type: row.type,
    name: row.name,
    ingestUrl: `${publicBaseUrl}/inbound/${row.id}`,
    reconcile: row.reconcile_base_url
      ? { baseUrl: row.reconcile_base_url, afterSeconds: row.reconcile_after_seconds ?? defaultReconcileAfterSeconds }
      : null,
    ...(row.hmac_config !== null && { hmac: row.hmac_config }),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
    previousSecretExpiresAt:
      row.previous_secret_expires_at && row.previous_secret_expires_at.getTime() > Date.now() ? row.previous_secret_expires_at.toISOString() : null,
  };
}
