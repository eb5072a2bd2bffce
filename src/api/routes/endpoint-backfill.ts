import { backfillWindowProblems, windowReadsPerEvent } from '../../domain/backfill.js';
import { conflict, notFound, ValidationError } from '../../domain/errors.js';
import { BackfillTooLarge, BackfillWindowTooLarge, previewBackfill, type BackfillRefusal } from '../../store/backfill-store.js';
import { rowToEvent } from '../../store/events-store.js';
import { databaseCutoffs } from '../../store/retention-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { backfillBody, backfillPreview, backfillStarted } from '../backfill-schemas.js';
import { idParams } from '../schemas.js';

function refused(why: BackfillRefusal): Error {
  if (why === 'not_found') return notFound('endpoint');
  if (why === 'deleted') return conflict('endpoint_deleted', 'the endpoint is deleted');
  return conflict('endpoint_disabled', 'the endpoint is disabled; enable it (PATCH status: active) before backfilling it');
}

/** A backfill too large for one job, as the 400 that says how to split it. */
function tooLarge(err: BackfillTooLarge | BackfillWindowTooLarge, since: Date): ValidationError {
  const refuse = (path: string, message: string) => new ValidationError([{ path, message }], 'backfill_too_large');
  const inParts = 'a later part never repeats an earlier one';
  if (err instanceof BackfillTooLarge) {
    return refuse('since', `more than ${err.max} events match (REPLAY_MAX_LIMIT); narrow since/until or eventTypes and backfill in parts: ${inParts}`);
  }
  const reads = `the window holds more than ${err.limit} events (${windowReadsPerEvent} × REPLAY_MAX_LIMIT), more than one backfill reads`;
  // So many events at the very instant of since that no earlier split exists.
  if (err.splitAt <= since) return refuse('until', `${reads}, all at ${since.toISOString()}: raise REPLAY_MAX_LIMIT to backfill them`);
  return refuse('until', `${reads}; backfill until ${err.splitAt.toISOString()} first, then from there: ${inParts}`);
}

/** POST /v1/endpoints/:id/backfill: deliveries for past events an endpoint never got. */
export function endpointBackfillRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints/:id/backfill',
      operationId: 'backfillEndpoint',
      summary:
        'Create a delivery, paced like a bulk replay, for each past event in [since, until) that the endpoint matches and has no delivery for; audited. Running it again creates nothing new. dryRun counts and samples without creating',
      tag: 'endpoints',
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      body: backfillBody,
      success: [
        { status: 202, description: 'Started: the job to follow with GET /v1/replays/{id}, and how many deliveries it created', schema: backfillStarted },
        { status: 200, description: 'Dry run: how many deliveries would be created, and the first events; nothing is created', schema: backfillPreview },
      ],
      errors: [404, 409],
    },
    async ({ params, body, scope }) => {
      // Retention's own clock and window (PostgreSQL's), so that a backfill never reaches a day it is removing.
      const { now, cut } = await databaseCutoffs(ctx.platformDb, ctx.config.retention);
      const problems = backfillWindowProblems(body, { now, retainedSince: cut.succeeded, retentionDays: ctx.config.retention.retentionDays });
      if (problems.length > 0) throw new ValidationError(problems);
      const request = { since: body.since, until: body.until ?? now, eventTypes: body.eventTypes, reason: body.reason };
      const max = ctx.config.replayMaxLimit;
      try {
        if (body.dryRun) {
          const preview = await previewBackfill(scope, params.id, request, max);
          if (typeof preview === 'string') throw refused(preview);
          return { status: 200, body: { total: preview.total, sample: preview.sample.map((e) => rowToEvent(e)) } };
        }
        const started = await ctx.lifecycle.backfill(scope, params.id, request, {
          ratePerSecond: ctx.config.replayRatePerSecond,
          defaultMaxAgeSeconds: ctx.config.retry.maxEventAgeSeconds,
          maxEvents: max,
        });
        if (typeof started === 'string') throw refused(started);
        return { status: 202, body: started };
      } catch (err) {
        if (err instanceof BackfillTooLarge || err instanceof BackfillWindowTooLarge) throw tooLarge(err, body.since);
        throw err;
      }
    },
  );
}
