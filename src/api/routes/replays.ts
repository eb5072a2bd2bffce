import { conflict, notFound, ValidationError } from '../../domain/errors.js';
import { rowToAudit, searchAuditLogQuery, type AuditRow } from '../../store/audit-store.js';
import { rowToDelivery } from '../../store/deliveries-store.js';
import { paginate } from '../../store/pagination.js';
import { previewReplay, replayProgress } from '../../store/replays-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { auditEntrySchema, auditQuery, bulkReplayBody, bulkReplayResult, replayAccepted, replayBody, replayProgressSchema } from '../replay-schemas.js';
import { idParams, page } from '../schemas.js';
import { requestSpan } from '../server-spans.js';

export function replayRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const pacing = { ratePerSecond: ctx.config.replayRatePerSecond, defaultMaxAgeSeconds: ctx.config.retry.maxEventAgeSeconds, retention: ctx.config.retention };
  routes.add(
    {
      method: 'post',
      path: '/v1/deliveries/:id/replay',
      operationId: 'replayDelivery',
      summary: 'Replay a dead or succeeded delivery with the same webhook-id and body; audited',
      tag: 'replays',
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      body: replayBody,
      success: { status: 202, description: 'Queued for delivery', schema: replayAccepted },
      errors: [404, 409],
    },
    async ({ res, params, body, scope }) => {
      const result = await ctx.lifecycle.replayDelivery(scope, params.id, body.reason, pacing, requestSpan(res));
      if (result === 'not_found') throw notFound('delivery');
      if (result === 'busy') throw conflict('delivery_in_progress', 'the delivery is already pending or in flight');
      if (result === 'endpoint_disabled') throw conflict('endpoint_disabled', 'the endpoint is disabled; re-enable it first');
      if (result === 'expired') throw conflict('expired', 'the delivery is past its retention window (RETENTION_DAYS, DEAD_LETTER_RETENTION_DAYS) and can no longer be replayed');
      return { status: 202, body: { status: 'replaying', deliveryId: params.id } };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/v1/replays',
      operationId: 'replayDeliveries',
      summary: 'Replay every delivery matching a filter, paced; dryRun counts and samples without sending',
      tag: 'replays',
      auth: 'tenant',
      // The filter narrows the session's scope, never widens it: deliveries come through TenantScope.
      portal: 'scoped',
      body: bulkReplayBody,
      success: [
        { status: 202, description: 'Started: the replay id and how many deliveries it takes', schema: bulkReplayResult },
        { status: 200, description: 'Dry run: the count and a sample of what would be replayed; nothing is sent', schema: bulkReplayResult },
      ],
    },
    async ({ res, body, scope }) => {
      const max = ctx.config.replayMaxLimit;
      if (body.limit !== undefined && body.limit > max) {
        throw new ValidationError([{ path: 'limit', message: `may be at most ${max} (REPLAY_MAX_LIMIT)` }], 'limit_too_large');
      }
      const limit = body.limit ?? max;
      if (body.dryRun) {
        const preview = await previewReplay(scope, body.filter, limit, ctx.config.retention);
        return { status: 200, body: { dryRun: true, count: preview.count, matching: preview.matching, sample: preview.sample.map((d) => rowToDelivery(d)) } };
      }
      const started = await ctx.lifecycle.startBulkReplay(scope, body.filter, body.reason, limit, pacing, requestSpan(res));
      return { status: 202, body: { dryRun: false, id: started.id, count: started.count } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/replays/:id',
      operationId: 'getReplay',
      reads: 'replica-when-read-only',
      summary: 'Progress of a bulk replay; a portal session limited to some endpoints or event types sees only the replays it started',
      tag: 'replays',
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'Progress', schema: replayProgressSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const progress = await replayProgress(scope, params.id);
      if (!progress) throw notFound('replay');
      return { status: 200, body: progress };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/audit-log',
      operationId: 'listAuditLog',
      reads: 'replica',
      summary: 'Who did what, why and when: replays, secret rotations, endpoint changes',
      tag: 'audit',
      auth: 'tenant',
      portal: 'scoped',
      query: auditQuery,
      success: { status: 200, description: 'A page of entries, newest first', schema: page(auditEntrySchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await paginate(searchAuditLogQuery(scope, query), 'audit_log.id', query, (r: AuditRow) => rowToAudit(r)),
    }),
  );
}
