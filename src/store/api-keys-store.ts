import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import { hashSecretToken, newSecretToken } from '../domain/secret-token.js';
import { recordAudit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';
import type { Actor } from './tenant-scope.js';

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
export async function insertApiKey(db: Knex | Knex.Transaction, tenantId: string, name: string): Promise<IssuedApiKey & { prefix: string }> {
  const id = newId('apiKey');
  const key = newSecretToken(API_KEY_PREFIX);
  const prefix = key.slice(0, API_KEY_PREFIX.length + VISIBLE_CHARS);
  const [row] = (await db('api_keys').insert({ id, tenant_id: tenantId, name, prefix, key_hash: hashSecretToken(key) }).returning('created_at')) as Array<{ created_at: Date }>;
  return { id, name, key, prefix, createdAt: row!.created_at.toISOString() };
}

/** A new key for the tenant, audited as created by `actor` (the tenant's own key, or the admin). */
export async function issueApiKey(db: Knex, tenantId: string, name: string, actor: Actor): Promise<IssuedApiKey> {
  return db.transaction(async (trx) => {
    const { prefix, ...issued } = await insertApiKey(trx, tenantId, name);
    await recordAudit(trx, { tenantId, actor, action: 'api_key.created', targetType: 'api_key', targetId: issued.id, details: { name, prefix } });
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
export function listApiKeys(db: Knex, tenantId: string, page: { limit: number; cursor?: string }): Promise<Page<ReturnType<typeof rowToApiKey>>> {
  const query = db('api_keys').where({ tenant_id: tenantId }).whereNull('revoked_at').select('*');
  return paginate(query, 'id', page, rowToApiKey);
}

export type RevokeResult = 'revoked' | 'not_found' | 'last_key';

/**
 * Revokes a live key of the tenant. The tenant's last live key is kept (`last_key`): revoking it
 * would lock the tenant out of its own API, and only the admin could let it back in. The tenant's
 * live keys are locked first, so two revocations at once cannot both see "another key remains".
 */
export async function revokeApiKey(db: Knex, tenantId: string, id: string, actor: Actor): Promise<RevokeResult> {
  return db.transaction(async (trx) => {
    const live = (await trx('api_keys').where({ tenant_id: tenantId }).whereNull('revoked_at').orderBy('id').forUpdate().select('id', 'name', 'prefix')) as Array<
      Pick<ApiKeyRow, 'id' | 'name' | 'prefix'>
    >;
    const target = live.find((key) => key.id === id);
    if (!target) return 'not_found';
    if (live.length === 1) return 'last_key';
    await trx('api_keys').where({ id }).update({ revoked_at: trx.fn.now() });
    await recordAudit(trx, {
      tenantId,
      actor,
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
 */
export async function findApiKey(db: Knex, keyHash: string): Promise<{ keyId: string; tenantId: string } | undefined> {
  const { rows } = await db.raw<{ rows: Array<{ id: string; tenant_id: string }> }>(
    `WITH found AS (
       SELECT id, tenant_id, last_used_at FROM api_keys WHERE key_hash = ? AND revoked_at IS NULL
     ), touched AS (
       UPDATE api_keys k SET last_used_at = now() FROM found
        WHERE k.id = found.id AND (found.last_used_at IS NULL OR found.last_used_at < now() - make_interval(secs => ?))
     )
     SELECT id, tenant_id FROM found`,
    [keyHash, LAST_USED_RESOLUTION_SECONDS],
  );
  const row = rows[0];
  return row ? { keyId: row.id, tenantId: row.tenant_id } : undefined;
}
