import type { Knex } from 'knex';
import { idOfUuid, newId } from '../domain/ids.js';
import { hashSecretToken, newSecretToken } from '../domain/secret-token.js';
import { audit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';
import type { TenantScope } from './tenant-scope.js';

/** Tenant API keys are `sk_` + 32 random bytes; the prefix is what tells them apart from the admin token. */
export const API_KEY_PREFIX = 'sk_';

/**
 * How much of a key is kept in clear and listed: enough to tell keys apart at a glance, far too
 * little to matter (8 base64url characters are 48 of the key's 256 random bits).
 */
const VISIBLE_CHARS = 8;

export interface ApiKeyRow {
  id: string;
  tenant_id: string;
  name: string;
  prefix: string | null;
  key_hash: string;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

/** What a new key answers, once: the key itself is never stored nor shown again. */
export interface IssuedApiKey {
  id: string;
  name: string;
  key: string;
  createdAt: string;
}

/** Inserts a new key without auditing it: the caller records what the key was created for. */
export async function insertApiKey(scope: TenantScope, name: string): Promise<IssuedApiKey & { prefix: string }> {
  const id = newId('apiKey');
  const key = newSecretToken(API_KEY_PREFIX);
  const prefix = key.slice(0, API_KEY_PREFIX.length + VISIBLE_CHARS);
  const [row] = (await scope.insert('api_keys', { id, name, prefix, key_hash: hashSecretToken(key) }).returning('created_at')) as Array<{ created_at: Date }>;
  return { id, name, key, prefix, createdAt: row!.created_at.toISOString() };
}

/** A new key for the tenant, audited as created by the scope's actor (the tenant's own key, or the admin). */
export async function issueApiKey(scope: TenantScope, name: string): Promise<IssuedApiKey> {
  return scope.transaction(async (s) => {
    const { prefix, ...issued } = await insertApiKey(s, name);
    await audit(s, { action: 'api_key.created', targetType: 'api_key', targetId: issued.id, details: { name, prefix } });
    return issued;
  });
}

export const rowToApiKey = (row: ApiKeyRow) => ({
  id: row.id,
  name: row.name,
  prefix: row.prefix,
  createdAt: row.created_at.toISOString(),
  lastUsedAt: row.last_used_at?.toISOString() ?? null,
});

/** The tenant's live keys, newest first; revoked keys are gone from the list as they are from use. */
export function listApiKeys(scope: TenantScope, page: { limit: number; cursor?: string }): Promise<Page<ReturnType<typeof rowToApiKey>>> {
  const query = scope.from('api_keys').whereNull('api_keys.revoked_at').select('api_keys.*');
  return paginate(query, 'api_keys.id', page, rowToApiKey);
}

export type RevokeResult = 'revoked' | 'not_found' | 'last_key';

/**
 * Revokes a live key of the tenant. The tenant's last live key is kept (`last_key`): revoking it
 * would lock the tenant out of its own API, and only the admin could let it back in. The tenant's
 * live keys are locked first, so two revocations at once cannot both see "another key remains".
 */
export async function revokeApiKey(scope: TenantScope, id: string): Promise<RevokeResult> {
  return scope.transaction(async (s) => {
    const live = (await s
      .from('api_keys')
      .whereNull('api_keys.revoked_at')
      .orderBy('api_keys.id')
      .forUpdate()
      .select('api_keys.id', 'api_keys.name', 'api_keys.prefix')) as Array<Pick<ApiKeyRow, 'id' | 'name' | 'prefix'>>;
    const target = live.find((key) => key.id === id);
    if (!target) return 'not_found';
    if (live.length === 1) return 'last_key';
    await s.from('api_keys').where('api_keys.id', id).update({ revoked_at: s.now() });
    await audit(s, {
      action: 'api_key.revoked',
      targetType: 'api_key',
      targetId: id,
      details: { name: target.name, prefix: target.prefix },
    });
    return 'revoked';
  });
}

/** lastUsedAt is kept to the minute: finer would cost a write per request on a busy key. */
const LAST_USED_RESOLUTION_SECONDS = 60;

/**
 * The live key with this hash (see hashSecretToken), in one round trip that also stamps last_used_at when
 * it is more than a minute old. Authentication caches keys for a second, so this runs at most once a
 * second per key and process, and writes at most once a minute per key whatever the traffic.
 * Unscoped: the hash is what tells whose key it is. Raw SQL because the builder cannot write a
 * data-modifying CTE, which is what keeps the look-up and the stamp in one round trip.
 */
export async function findApiKey(platformDb: Knex, keyHash: string): Promise<{ keyId: string; tenantId: string } | undefined> {
  const { rows } = await platformDb.raw<{ rows: Array<{ id: string; tenant_id: string }> }>(
    `WITH found AS (
       SELECT id, tenant_id, last_used_at FROM api_keys WHERE key_hash = :keyHash AND revoked_at IS NULL
     ), touched AS (
       UPDATE api_keys k SET last_used_at = now() FROM found
        WHERE k.id = found.id AND (found.last_used_at IS NULL OR found.last_used_at < now() - make_interval(secs => :resolutionSeconds))
     )
     SELECT id, tenant_id FROM found`,
    { keyHash, resolutionSeconds: LAST_USED_RESOLUTION_SECONDS },
  );
  const row = rows[0];
  return row ? { keyId: row.id, tenantId: idOfUuid('tenant', row.tenant_id) } : undefined;
}
