/**
 * Endpoint health: the one writer of an endpoint's status, and of the circuit.
 *
 *   circuit            SQL function `endpoint_health_after_attempts` (db/functions), moved by every
 *                      recorded attempt; `next_due` obeys it and src/domain/circuit.ts shows it
 *   410 Gone           `disableGone`: the attempt that got it disables the endpoint before its result
 *                      is recorded, so no slot hands anything on to it afterwards
 *   failing too long   `disableFailing`: the sweep disables endpoints whose failure streak has lasted
 *                      longer than AUTO_DISABLE_AFTER_SECONDS
 *   the tenant         `setStatus`, inside the endpoint update's transaction, which audits it
 *
 * A disable by the platform writes its `endpoint.auto_disabled` audit entry in the same transaction,
 * and only the call that changed the row reports it, so one disable is one entry and one
 * `platform.endpoint.disabled`.
 */
import type { Knex } from 'knex';
import { recordAudit } from '../store/audit-store.js';

export type EndpointStatus = 'active' | 'disabled';

export interface DisabledEndpoint {
  id: string;
  tenantId: string;
  reason: string;
}

const systemActor = { type: 'system', id: null } as const;

/** The columns a status change writes. An endpoint enabled again starts with a closed circuit. */
function statusColumns(trx: Knex.Transaction, to: EndpointStatus, reason: string | null): Record<string, unknown> {
  const columns: Record<string, unknown> = { status: to, disabled_reason: to === 'disabled' ? reason : null, updated_at: trx.fn.now() };
  if (to === 'active') Object.assign(columns, { consecutive_failures: 0, failing_since: null, circuit_open_until: null });
  return columns;
}

/** A tenant's status change, in the caller's transaction (which holds the endpoint's row and audits). */
export async function setStatus(trx: Knex.Transaction, endpointId: string, to: EndpointStatus, reason: string | null): Promise<void> {
  await trx('endpoints').where({ id: endpointId }).update(statusColumns(trx, to, reason));
}

async function disableBySystem(trx: Knex.Transaction, endpoint: DisabledEndpoint): Promise<void> {
  await recordAudit(trx, {
    tenantId: endpoint.tenantId,
    actor: systemActor,
    action: 'endpoint.auto_disabled',
    targetType: 'endpoint',
    targetId: endpoint.id,
    reason: endpoint.reason,
  });
}

/**
 * Disables an endpoint that answered 410 Gone. Several attempts in flight may all get the 410; the
 * `status = 'active'` condition lets exactly one of them make the change, and only it returns true.
 */
export async function disableGone(db: Knex, endpoint: DisabledEndpoint): Promise<boolean> {
  return db.transaction(async (trx) => {
    const changed = await trx('endpoints')
      .where({ id: endpoint.id, status: 'active' })
      .whereNull('deleted_at')
      .update(statusColumns(trx, 'disabled', endpoint.reason));
    if (changed === 0) return false;
    await disableBySystem(trx, endpoint);
    return true;
  });
}

/** Disables the endpoints failing continuously for longer than the window; answers which. */
export async function disableFailing(db: Knex, autoDisableAfterSeconds: number): Promise<DisabledEndpoint[]> {
  return db.transaction(async (trx) => {
    const failing: Array<{ id: string; tenant_id: string; failing_since: Date }> = await trx('endpoints')
      .select('id', 'tenant_id', 'failing_since')
      .where('status', 'active')
      .whereNull('deleted_at')
      .where('failing_since', '<', trx.raw('now() - make_interval(secs => :window)', { window: autoDisableAfterSeconds }))
      .forUpdate()
      .skipLocked();
    const disabled: DisabledEndpoint[] = [];
    for (const ep of failing) {
      const endpoint = { id: ep.id, tenantId: ep.tenant_id, reason: `failing continuously since ${ep.failing_since.toISOString()}` };
      await trx('endpoints').where({ id: ep.id }).update(statusColumns(trx, 'disabled', endpoint.reason));
      await disableBySystem(trx, endpoint);
      disabled.push(endpoint);
    }
    return disabled;
  });
}
