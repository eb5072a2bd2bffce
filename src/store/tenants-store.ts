import type { Knex } from 'knex';
import { idOfUuid, newId, uuidOf, uuidOfId } from '../domain/ids.js';
import { insertApiKey } from './api-keys-store.js';
import { audit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';
import { TenantScope } from './tenant-scope.js';

/** The name of the key a tenant is created with, until the tenant names keys of its own. */
const FIRST_KEY_NAME = 'default';

/** Tenants are the admin's: every function here takes the unscoped `platformDb`. */
export async function createTenant(platformDb: Knex, name: string): Promise<{ id: string; name: string; apiKey: string }> {
  const id = newId('tenant');
  return platformDb.transaction(async (trx) => {
    await trx('tenants').insert({ id: uuidOf('tenant', id), name });
    const scope = TenantScope.forAdmin(trx, id);
    const key = await insertApiKey(scope, FIRST_KEY_NAME);
    await audit(scope, {
      action: 'tenant.created',
      targetType: 'tenant',
      targetId: id,
      details: { name, apiKeyId: key.id },
    });
    return { id, name, apiKey: key.key };
  });
}

interface TenantRow {
  id: string;
  name: string;
  created_at: Date;
}

/** `id` as stored: the uuid the tenant's TypeID encodes. */
const rowToTenant = (row: TenantRow) => ({ id: idOfUuid('tenant', row.id), name: row.name, createdAt: row.created_at.toISOString() });

export function listTenants(platformDb: Knex, page: { limit: number; cursor?: string }): Promise<Page<ReturnType<typeof rowToTenant>>> {
  return paginate(platformDb('tenants').select('*'), 'id', page, rowToTenant, 'tenant');
}

export async function findTenant(platformDb: Knex, id: string): Promise<ReturnType<typeof rowToTenant> | undefined> {
  const key = uuidOfId('tenant', id);
  if (key === null) return undefined;
  const row = (await platformDb('tenants').where({ id: key }).first()) as TenantRow | undefined;
  return row ? rowToTenant(row) : undefined;
}
