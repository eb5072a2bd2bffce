import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import { insertApiKey } from './api-keys-store.js';
import { recordAudit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';

/** The name of the key a tenant is created with, until the tenant names keys of its own. */
const FIRST_KEY_NAME = 'default';

export async function createTenant(db: Knex, name: string): Promise<{ id: string; name: string; apiKey: string }> {
  const id = newId('tenant');
  return db.transaction(async (trx) => {
    await trx('tenants').insert({ id, name });
    const key = await insertApiKey(trx, id, FIRST_KEY_NAME);
    await recordAudit(trx, {
      tenantId: id,
      actor: { type: 'admin', id: null },
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

const rowToTenant = (row: TenantRow) => ({ id: row.id, name: row.name, createdAt: row.created_at.toISOString() });

export function listTenants(db: Knex, page: { limit: number; cursor?: string }): Promise<Page<ReturnType<typeof rowToTenant>>> {
  return paginate(db('tenants').select('*'), 'id', page, rowToTenant);
}

export async function findTenant(db: Knex, id: string): Promise<ReturnType<typeof rowToTenant> | undefined> {
  const row = (await db('tenants').where({ id }).first()) as TenantRow | undefined;
  return row ? rowToTenant(row) : undefined;
}
