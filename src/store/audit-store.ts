import type { Knex } from 'knex';
import { newId, uuidOf } from '../domain/ids.js';
import type { Actor, TenantScope } from './tenant-scope.js';

export interface AuditEntry {
  tenantId: string | null;
  actor: Actor;
  action: string;
  targetType: string;
  targetId: string;
  reason?: string | null;
  details?: Record<string, unknown>;
}

const auditRow = (entry: Omit<AuditEntry, 'tenantId'>) => ({
  id: newId('audit'),
  actor_type: entry.actor.type,
  actor_id: entry.actor.id,
  action: entry.action,
  target_type: entry.targetType,
  target_id: entry.targetId,
  reason: entry.reason ?? null,
  details: JSON.stringify(entry.details ?? {}),
});

/**
 * Written in the same transaction as the change it describes, so neither exists without the other.
 * For the platform's own jobs, which act across tenants; a tenant's change is audited by `audit`.
 */
export async function recordAudit(platformDb: Knex | Knex.Transaction, entry: AuditEntry): Promise<void> {
  await platformDb('audit_log').insert({ ...auditRow(entry), tenant_id: entry.tenantId && uuidOf('tenant', entry.tenantId) });
}

/** A change made through a tenant's scope, audited as the scope's tenant and actor (see recordAudit). */
export async function audit(scope: TenantScope, entry: Omit<AuditEntry, 'tenantId' | 'actor'>): Promise<void> {
  await scope.insert('audit_log', auditRow({ ...entry, actor: scope.actor }));
}

export interface AuditRow {
  id: string;
  actor_type: string;
  actor_id: string | null;
  action: string;
  target_type: string;
  target_id: string;
  reason: string | null;
  details: Record<string, unknown>;
  created_at: Date;
}

export interface AuditSearch {
  action?: string;
  targetType?: string;
  targetId?: string;
  since?: Date;
  until?: Date;
}

/** The scope's audit entries matching the search; for paginate. */
export function searchAuditLogQuery(scope: TenantScope, f: AuditSearch) {
  const q = scope.from('audit_log').select('audit_log.*');
  if (f.action) q.where('audit_log.action', f.action);
  if (f.targetType) q.where('audit_log.target_type', f.targetType);
  if (f.targetId) q.where('audit_log.target_id', f.targetId);
  if (f.since) q.where('audit_log.created_at', '>=', f.since);
  if (f.until) q.where('audit_log.created_at', '<', f.until);
  return q;
}

export const rowToAudit = (r: AuditRow) => ({
  id: r.id,
  actor: { type: r.actor_type, id: r.actor_id },
  action: r.action,
  target: { type: r.target_type, id: r.target_id },
  reason: r.reason,
  details: r.details,
  createdAt: r.created_at.toISOString(),
});
