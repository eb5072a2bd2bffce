import type { Knex } from 'knex';
import { UNFINISHED_STATUSES } from '../domain/delivery-status.js';
import { idOfUuid, newId, uuidOfId } from '../domain/ids.js';
import type { RetentionPolicy } from '../domain/retention.js';
import { audit } from './audit-store.js';
import { deliveryColumns, filteredDeliveries, type DeliveryRow } from './deliveries-store.js';
import type { TenantScope } from './tenant-scope.js';

export type ReplayableStatus = 'dead' | 'succeeded';

export interface ReplayFilter {
  status?: ReplayableStatus;
  endpointId?: string;
  eventType?: string;
  reason?: string;
  since?: Date;
  until?: Date;
}

export interface ReplayPacing {
  ratePerSecond: number;
  defaultMaxAgeSeconds: number;
  /**
   * A delivery whose retention window has passed is no longer replayable: retention may be removing
   * it (and has perhaps dropped its attempts) at this moment, so it must not come back to life.
   */
  retention: RetentionPolicy;
}

/** SQL: the delivery (aliased `deliveries`) is still inside its retention window (db/functions/retention_cutoff.sql). */
const withinWindow = `((deliveries.status = 'dead' AND deliveries.updated_at >= retention_cutoff(:deadDays))
  OR (deliveries.status = 'succeeded' AND deliveries.updated_at >= retention_cutoff(:succeededDays)))`;
const windowBindings = (r: RetentionPolicy) => ({ deadDays: r.deadLetterRetentionDays, succeededDays: r.retentionDays });

/**
 * Replays one dead or succeeded delivery through the normal dispatcher (called by the lifecycle, which
 * passes its `restart` transition): same delivery row, same
 * event (so the same webhook-id and body bytes), trigger `replay`, audited with its reason.
 */
export async function replayDelivery(
  scope: TenantScope,
  id: string,
  reason: string,
  pacing: ReplayPacing,
  restart: (trx: Knex.Transaction, id: string, defaultMaxAgeSeconds: number) => Promise<void>,
): Promise<'replayed' | 'not_found' | 'busy' | 'endpoint_disabled' | 'expired'> {
  const key = uuidOfId('delivery', id);
  if (key === null) return 'not_found';
  return scope.transactionWithPlatformDb(async (s, trx) => {
    const current: { status: string; ep_status: string; deleted_at: Date | null; in_window: boolean } | undefined = await s
      .from('deliveries')
      .join('endpoints', 'endpoints.id', 'deliveries.endpoint_id')
      .where('deliveries.id', key)
      .forUpdate()
      .first('deliveries.status', 'endpoints.status as ep_status', 'endpoints.deleted_at', s.expression(`${withinWindow} AS in_window`, windowBindings(pacing.retention)));
    if (!current) return 'not_found';
    if (current.status !== 'dead' && current.status !== 'succeeded') return 'busy';
    if (!current.in_window) return 'expired';
    if (current.ep_status === 'disabled' || current.deleted_at) return 'endpoint_disabled';
    await restart(trx, id, pacing.defaultMaxAgeSeconds);
    await audit(s, { action: 'delivery.replayed', targetType: 'delivery', targetId: id, reason });
    return 'replayed';
  });
}

function filtered(scope: TenantScope, filter: ReplayFilter, retention: RetentionPolicy): Knex.QueryBuilder {
  // Only deliveries whose endpoint can take them (a disabled endpoint would dead-letter them again;
  // a paused one keeps them pending until it resumes) and that retention may not be removing.
  return filteredDeliveries(scope, { ...filter, status: filter.status ?? 'dead' })
    .join('endpoints', 'endpoints.id', 'deliveries.endpoint_id')
    .whereNot('endpoints.status', 'disabled')
    .whereNull('endpoints.deleted_at')
    .whereRaw(withinWindow, windowBindings(retention));
}

/** How many deliveries a dry run shows; never more than the replay itself would take. */
const sampleSize = 10;

/** What a bulk replay would touch: the count (up to the limit) and a sample, changing nothing. */
export async function previewReplay(scope: TenantScope, filter: ReplayFilter, limit: number, retention: RetentionPolicy) {
  const [{ count }] = await filtered(scope, filter, retention).count({ count: '*' });
  // The first deliveries the replay would take (same order as startBulkReplay), so the sample is
  // a preview of the real thing and never shows a delivery beyond the limit.
  const sample: DeliveryRow[] = await filtered(scope, filter, retention)
    .select([...deliveryColumns, 'events.type as event_type'])
    .orderBy('deliveries.id')
    .limit(Math.min(sampleSize, limit));
  return { count: Math.min(Number(count), limit), matching: Number(count), sample };
}

/**
 * A bulk replay restarts up to `limit` deliveries, oldest first, spaced at the replay rate so the
 * customer sees a steady stream rather than a spike; each endpoint's own concurrency and rate limit
 * still apply on top, because replayed deliveries go through normal admission.
 */
export async function startBulkReplay(
  scope: TenantScope,
  filter: ReplayFilter,
  reason: string,
  limit: number,
  pacing: ReplayPacing,
  restartPaced: (trx: Knex.Transaction, ids: string[], pacing: { replayId: string; ratePerSecond: number; defaultMaxAgeSeconds: number }) => Promise<void>,
) {
  return scope.transactionWithPlatformDb(async (s, trx) => {
    const id = newId('replay');
    const stored: string[] = await filtered(s, filter, pacing.retention).orderBy('deliveries.id').limit(limit).forUpdate(['deliveries']).pluck('deliveries.id');
    const ids = stored.map((uuid) => idOfUuid('delivery', uuid));
    await s.insert('replays', {
      id,
      actor_type: s.actor.type,
      actor_id: s.actor.id,
      reason,
      filter: JSON.stringify(filter),
      total: ids.length,
    });
    await restartPaced(trx, ids, { replayId: id, ratePerSecond: pacing.ratePerSecond, defaultMaxAgeSeconds: pacing.defaultMaxAgeSeconds });
    await audit(s, {
      action: 'replay.started',
      targetType: 'replay',
      targetId: id,
      reason,
      details: { filter, count: ids.length, limit },
    });
    return { id, count: ids.length };
  });
}

/**
 * Progress is read from the deliveries themselves, so it is right whichever worker did the work.
 * A later replay may take over some of this replay's finished deliveries (it re-tags them), so
 * "completed" means none of the deliveries still tagged with this replay is waiting or in flight;
 * comparing done + failed with the total would leave such a replay "running" forever.
 */
export async function replayProgress(scope: TenantScope, id: string) {
  const replay: { id: string; kind: string; total: number; reason: string; filter: unknown; created_at: Date } | undefined = await scope
    .from('replays')
    .where('replays.id', id)
    .first();
  if (!replay) return undefined;
  const rows: Array<{ status: string; count: number }> = await scope
    .from('deliveries')
    .where('deliveries.replay_id', id)
    .groupBy('deliveries.status')
    .select('deliveries.status', scope.expression('count(*)::int AS count'));
  const by = (status: string) => rows.find((r) => r.status === status)?.count ?? 0;
  const done = by('succeeded');
  const failed = by('dead');
  const outstanding = UNFINISHED_STATUSES.reduce((n, status) => n + by(status), 0);
  return {
    id: replay.id,
    kind: replay.kind,
    status: outstanding > 0 ? 'running' : 'completed',
    total: replay.total,
    done,
    failed,
    reason: replay.reason,
    filter: replay.filter,
    createdAt: replay.created_at.toISOString(),
  };
}
