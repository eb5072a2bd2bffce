import type { Knex } from 'knex';
import { newId } from '../domain/ids.js';
import type { Actor } from './tenant-scope.js';

export interface AuditEntry {
  tenantId: string | null;
  actor: Actor;
  action: string;
  targetType: string;
  targetId: string;
  reason?: string | null;
  details?: Record<string, unknown>;
}

/** Written in the same transaction as the change it describes, so neither exists without the other. */
export async function recordAudit(db: Knex | Knex.Transaction, entry: AuditEntry): Promise<void> {
  await db('audit_log').insert({
    id: newId('audit'),
    tenant_id: entry.tenantId,
    actor_type: entry.actor.type,
    actor_id: entry.actor.id,
    action: entry.action,
    target_type: entry.targetType,
    target_id: entry.targetId,
    reason: entry.reason ?? null,
    details: JSON.stringify(entry.details ?? {}),
  });
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

export const rowToAudit = (r: AuditRow) => ({
  id: r.id,
  actor: { type: r.actor_type, id: r.actor_id },
  action: r.action,
  target: { type: r.target_type, id: r.target_id },
  reason: r.reason,
  details: r.details,
  createdAt: r.created_at.toISOString(),
});
