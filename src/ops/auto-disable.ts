import type { Knex } from 'knex';
import { recordAudit } from '../store/audit-store.js';

/**
 * Disables an endpoint that answered 410 Gone, with its audit entry in the same transaction.
 * Several attempts in flight may all get the 410; the row-level `status = 'active'` condition lets
 * exactly one of them make the change, and only that one returns true (and so audits and announces
 * it), so one disable is one audit entry and one `platform.endpoint.disabled`.
 */
export async function autoDisableEndpoint(db: Knex, endpoint: { id: string; tenantId: string; reason: string }): Promise<boolean> {
  return db.transaction(async (trx) => {
    const changed = await trx('endpoints')
      .where({ id: endpoint.id, status: 'active' })
      .whereNull('deleted_at')
      .update({ status: 'disabled', disabled_reason: endpoint.reason, updated_at: trx.fn.now() });
    if (changed === 0) return false;
    await recordAudit(trx, {
      tenantId: endpoint.tenantId,
      actor: { type: 'system', id: null },
      action: 'endpoint.auto_disabled',
      targetType: 'endpoint',
      targetId: endpoint.id,
      reason: endpoint.reason,
    });
    return true;
  });
}
