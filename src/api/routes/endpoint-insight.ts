import { forbidden, notFound, ValidationError } from '../../domain/errors.js';
import { matchesEventType } from '../../domain/event-types.js';
import { windowOrderProblem } from '../../domain/time-window.js';
import { RawJson } from '../../domain/raw-json.js';
import { getEndpoint } from '../../store/endpoints-store.js';
import { endpointStats } from '../../store/endpoint-stats-store.js';
import { sendTestEvent } from '../../store/endpoint-test-store.js';
import type { ApiContext } from '../context.js';
import { rawJsonMember } from '../json-body.js';
import type { ApiRoutes } from '../route.js';
import { endpointStatsQuery, endpointStatsSchema, idParams, testEndpointBody, testSentSchema } from '../schemas.js';
import { effectiveRetryPolicy } from './endpoint-view.js';

const hourMs = 3_600_000;
/** The longest window GET /v1/endpoints/:id/stats answers for: a month of hourly points. */
export const maxStatsWindowDays = 31;

/** What an endpoint does with traffic: send it a test event, and its attempt statistics. */
export function endpointInsightRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const tag = 'endpoints';

  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints/:id/test',
      operationId: 'sendTestEvent',
      summary: 'Send a test event (platform.test unless another type is given) to this endpoint only, signed and retried like any other; a portal session limited to some event types must name one of them',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      body: testEndpointBody,
      success: { status: 202, description: 'Accepted: the event and its one delivery, to follow with GET /v1/deliveries/{id}', schema: testSentSchema },
      errors: [404, 409],
    },
    async ({ req, params, body, scope }) => {
      const type = body.type ?? 'platform.test';
      // A session limited to some event types would not see a test of another type: refused rather
      // than sent into a delivery it could neither follow nor replay.
      const sessionTypes = scope.session?.eventTypes;
      if (sessionTypes && !matchesEventType(sessionTypes, type)) {
        throw forbidden(`this portal link covers only the event types ${sessionTypes.join(', ')}: send the test event as one of them (type)`);
      }
      // The test payload is forwarded as written, like any event's (see src/domain/raw-json.ts).
      const data = body.data === undefined ? RawJson.of({}) : rawJsonMember(req, 'data');
      const sent = await sendTestEvent(scope, params.id, { type, data }, ctx.config.retry.maxEventAgeSeconds);
      if (!sent) throw notFound('endpoint');
      ctx.lifecycle.fannedOut({ pending: 1, deadDisabled: 0 });
      return { status: 202, body: sent };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id/stats',
      operationId: 'getEndpointStats',
      reads: 'replica',
      summary: "Attempts, outcomes, latency percentiles and an hourly series of the endpoint's attempts in a window (the last 24 h by default)",
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      query: endpointStatsQuery,
      success: { status: 200, description: 'The statistics', schema: endpointStatsSchema },
      errors: [404],
    },
    async ({ params, query, scope }) => {
      const until = query.until ?? new Date();
      const since = query.since ?? new Date(until.getTime() - 24 * hourMs);
      const problems = [];
      const order = windowOrderProblem(since, until);
      if (order) problems.push(order);
      else if (until.getTime() - since.getTime() > maxStatsWindowDays * 24 * hourMs) {
        problems.push({ path: 'since', message: `the window may span at most ${maxStatsWindowDays} days` });
      }
      if (problems.length > 0) throw new ValidationError(problems);
      const row = await getEndpoint(scope, params.id);
      if (!row) throw notFound('endpoint');
      // Deliveries made up to the longest maximum event age before the window may be attempted in it.
      const lookbackSeconds = Math.max(ctx.config.retry.maxEventAgeSeconds, effectiveRetryPolicy(ctx.config, row).maxEventAgeSeconds);
      return { status: 200, body: await endpointStats(scope, row.id, { since, until, lookbackSeconds }) };
    },
  );
}
