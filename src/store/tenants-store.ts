import { createHash, randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import { recordAudit } from './audit-store.js';

export const hashApiKey = (key: string) => createHash('sha256').update(key).digest('hex');

export async function createTenant(db: Knex, name: string): Promise<{ id: string; name: string; apiKey: string }> {
  const id = newId('tenant');
  const keyId = newId('apiKey');
  const apiKey = `sk_${randomBytes(32).toString('base64url')}`;
  await db.transaction(async (trx) => {
    await trx('tenants').insert({ id, name });
    await trx('api_keys').insert({ id: keyId, tenant_id: id, key_hash: hashApiKey(apiKey) });
    await recordAudit(trx, {
      tenantId: id,
      actor: { type: 'admin', id: null },
      action: 'tenant.created',
      targetType: 'tenant',
      targetId: id,
      details: { name, apiKeyId: keyId },
    });
  });
  return { id, name, apiKey };
}

/** The live key with this hash (see hashApiKey): the caller hashes once, for its own cache too. */
export async function findApiKey(db: Knex, keyHash: string): Promise<{ keyId: string; tenantId: string } | undefined> {
  const row = await db('api_keys').where({ key_hash: keyHash }).whereNull('revoked_at').first('id', 'tenant_id');
  return row ? { keyId: row.id, tenantId: row.tenant_id } : undefined;
}
