import type { Knex } from 'knex';
import { idOfUuid } from '../domain/ids.js';

export interface ReconcileCandidate {
  tenantId: string;
  source_id: string;
  message_id: string;
  status: string | null;
  base_url: string;
  api_key_enc: string;
}

/**
 * Claims up to `limit` messages of reconciling sources that sit in a non-final status for longer
 * than their source's afterSeconds and were not polled within the last interval. Claiming stamps
 * reconciled_at under SKIP LOCKED, so several workers never poll the same message in one round.
 * Unscoped: reconciliation is the platform's own job, over every tenant. Raw: the builder cannot
 * write a data-modifying CTE.
 */
export async function claimReconcileBatch(db: Knex, limit: number, intervalSeconds: number): Promise<ReconcileCandidate[]> {
  const { rows } = await db.raw<{ rows: Array<Omit<ReconcileCandidate, 'tenantId'> & { tenant_id: string }> }>(
    `WITH due AS (
       SELECT m.tenant_id, m.source_id, m.message_id
         FROM messages m JOIN sources s ON s.id = m.source_id
        WHERE s.type = 'momo-communication' AND s.reconcile_base_url IS NOT NULL
          AND s.deleted_at IS NULL -- a deleted source is not asked about any more
          -- Only resources with a status to ask about: an order or group id of the same source
          -- (status NULL) has no /messages/<id> at the provider and would be polled forever.
          AND m.status IS NOT NULL AND NOT m.status_final
          AND m.updated_at < now() - make_interval(secs => s.reconcile_after_seconds)
          AND (m.reconciled_at IS NULL OR m.reconciled_at < now() - make_interval(secs => :intervalSeconds))
        ORDER BY m.reconciled_at NULLS FIRST, m.updated_at
        LIMIT :limit
        FOR UPDATE OF m SKIP LOCKED
     )
     UPDATE messages m SET reconciled_at = now()
       FROM due, sources s
      WHERE m.tenant_id = due.tenant_id AND m.source_id = due.source_id AND m.message_id = due.message_id
        AND s.id = m.source_id
     RETURNING m.tenant_id, m.source_id, m.message_id, m.status, s.reconcile_base_url AS base_url, s.reconcile_api_key_enc AS api_key_enc`,
    { intervalSeconds, limit },
  );
  return rows.map(({ tenant_id, ...row }) => ({ ...row, tenantId: idOfUuid('tenant', tenant_id) }));
}
