import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import type { SecretBox } from '../domain/secret-box.js';
import type { SourceType } from '../inbound/adapter.js';
import type { TenantScope } from './tenant-scope.js';

export interface SourceRow {
  id: string;
  tenant_id: string;
  type: SourceType;
  name: string;
  secret_enc: string;
  reconcile_base_url: string | null;
  reconcile_api_key_enc: string | null;
  reconcile_after_seconds: number | null;
  created_at: Date;
}

export interface NewSource {
  type: SourceType;
  name: string;
  secret: string;
  reconcile?: { baseUrl: string; apiKey: string; afterSeconds?: number };
}

export const defaultReconcileAfterSeconds = 300;

export async function insertSource(scope: TenantScope, box: SecretBox, input: NewSource): Promise<SourceRow> {
  const id = newId('source');
  const [row] = await scope.db('sources')
    .insert({
      id,
      tenant_id: scope.tenantId,
      type: input.type,
      name: input.name,
      secret_enc: box.seal(input.secret, id),
      reconcile_base_url: input.reconcile?.baseUrl ?? null,
      reconcile_api_key_enc: input.reconcile ? box.seal(input.reconcile.apiKey, `${id}:reconcile`) : null,
      reconcile_after_seconds: input.reconcile ? (input.reconcile.afterSeconds ?? defaultReconcileAfterSeconds) : null,
    })
    .returning('*');
  return row as SourceRow;
}

/** Unscoped on purpose: inbound callbacks carry no API key; the source's own secret authenticates them. */
export async function findSourceForIntake(db: Knex, id: string): Promise<SourceRow | undefined> {
  return db<SourceRow>('sources').where({ id }).first();
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
    createdAt: row.created_at.toISOString(),
  };
}
