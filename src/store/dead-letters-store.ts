import { DEAD_LETTER_REASONS, type DeadLetterReason } from '../domain/delivery-status.js';
import { idOfUuid } from '../domain/ids.js';
import type { TenantScope } from './tenant-scope.js';

/** The most endpoints one summary lists by name; the total and the split by reason stay exact. */
export const DEAD_LETTER_ENDPOINTS_CAP = 100;

export interface DeadLetterSummary {
  total: number;
  byReason: Record<DeadLetterReason, number>;
  byEndpoint: { endpointId: string; count: number }[];
  byEndpointTruncated: boolean;
}

/**
 * Deliveries dead-lettered now, counted in PostgreSQL through TenantScope (a portal session counts
 * only the deliveries it may see). Served by deliveries_dead (tenant_id, dead_reason, id) WHERE
 * dead_reason IS NOT NULL (set exactly when dead): only dead deliveries are read, and dead-letter retention bounds how many there are.
 */
export async function deadLetterSummary(scope: TenantScope): Promise<DeadLetterSummary> {
  const rows: { endpoint_id: string; dead_reason: string | null; n: number }[] = await scope
    .from('deliveries')
    .where('deliveries.status', 'dead')
    .whereNotNull('deliveries.dead_reason')
    .groupBy('deliveries.endpoint_id', 'deliveries.dead_reason')
    .select('deliveries.endpoint_id', 'deliveries.dead_reason', scope.expression('count(*)::int AS n'));
  const byReason = Object.fromEntries(DEAD_LETTER_REASONS.map((r) => [r, 0])) as Record<DeadLetterReason, number>;
  const byEndpoint = new Map<string, number>();
  let total = 0;
  for (const r of rows) {
    total += r.n;
    if (r.dead_reason && r.dead_reason in byReason) byReason[r.dead_reason as DeadLetterReason] += r.n;
    const endpointId = idOfUuid('endpoint', r.endpoint_id);
    byEndpoint.set(endpointId, (byEndpoint.get(endpointId) ?? 0) + r.n);
  }
  const ranked = [...byEndpoint].map(([endpointId, count]) => ({ endpointId, count })).sort((a, b) => b.count - a.count || a.endpointId.localeCompare(b.endpointId));
  return { total, byReason, byEndpoint: ranked.slice(0, DEAD_LETTER_ENDPOINTS_CAP), byEndpointTruncated: ranked.length > DEAD_LETTER_ENDPOINTS_CAP };
}
