import { z } from 'zod';
import { circuitView } from '../../domain/circuit.js';
import { forbidden, notFound, ValidationError } from '../../domain/errors.js';
import { matchesEventType } from '../../domain/event-types.js';
import { maxAgeProblem } from '../../domain/retention.js';
import { resolvePolicy } from '../../domain/retry-policy.js';
import { generateWebhookSecret } from '../../domain/signing.js';
import { checkTargetUrl } from '../../dispatch/address-guard.js';
import {
  getEndpoint,
  insertEndpoint,
  listEndpointsQuery,
  revealEndpointSecret,
  rotateEndpointSecret,
  rowToEndpoint,
  updateEndpoint,
  type EndpointRow,
} from '../../store/endpoints-store.js';
import { endpointStats } from '../../store/endpoint-stats-store.js';
import { sendTestEvent } from '../../store/endpoint-test-store.js';
import { RawJson } from '../../domain/raw-json.js';
import { rawJsonMember } from '../json-body.js';
import { paginate } from '../../store/pagination.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import {
  createEndpointBody,
  currentSecretSchema,
  endpointSchema,
  endpointStatsQuery,
  endpointStatsSchema,
  idParams,
  page,
  pageQuery,
  patchEndpointBody,
  secretSchema,
  testEndpointBody,
  testSentSchema,
} from '../schemas.js';

const hourMs = 3_600_000;
/** The longest window GET /v1/endpoints/:id/stats answers for: a month of hourly points. */
export const maxStatsWindowDays = 31;

export function endpointRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const validUrl = (url: string) => {
    const check = checkTargetUrl(url, { allowPrivate: ctx.config.allowPrivateTargets });
    if (!check.ok) throw new ValidationError([{ path: 'url', message: check.message }], check.code, check.message);
    return check.url.toString();
  };
  // An endpoint's deliveries may not outlive the data retention keeps (see src/domain/retention.ts).
  const withinRetention = (policy: { maxEventAgeSeconds?: number } | undefined) => {
    const problem = policy?.maxEventAgeSeconds === undefined ? undefined : maxAgeProblem(policy.maxEventAgeSeconds, ctx.config.retention);
    if (problem) throw new ValidationError([{ path: 'retryPolicy.maxEventAgeSeconds', message: problem }]);
  };
  const effectiveRetryPolicy = (row: EndpointRow) => ({
    ...resolvePolicy(ctx.config.retry, row.retry_policy),
    attemptTimeoutMs: ctx.config.attemptTimeoutMs,
  });
  // What dispatch obeys now, beside what the tenant configured: the circuit and the merged policy.
  const present = (row: EndpointRow, now = new Date()) => ({
    ...rowToEndpoint(row),
    circuit: circuitView({ consecutiveFailures: row.consecutive_failures, openUntil: row.circuit_open_until }, ctx.config.circuitFailureThreshold, now),
    effectiveRetryPolicy: effectiveRetryPolicy(row),
  });
  const tag = 'endpoints';

  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints',
      operationId: 'createEndpoint',
      summary: 'Register an endpoint; its signing secret is returned once',
      tag,
      auth: 'tenant',
      portal: 'tenant-wide',
      body: createEndpointBody,
      success: { status: 201, description: 'Created', schema: endpointSchema },
    },
    async ({ body, scope }) => {
      withinRetention(body.retryPolicy);
      const secret = generateWebhookSecret();
      const row = await insertEndpoint(scope, ctx.box, { ...body, url: validUrl(body.url) }, secret, ctx.config.endpointMaxConcurrency);
      return { status: 201, body: { ...present(row), secret } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints',
      operationId: 'listEndpoints',
      summary: 'List endpoints',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of endpoints', schema: page(endpointSchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await paginate(listEndpointsQuery(scope), 'endpoints.id', query, (r: EndpointRow) => present(r)),
    }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id',
      operationId: 'getEndpoint',
      summary: 'Get an endpoint',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The endpoint', schema: endpointSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const row = await getEndpoint(scope, params.id);
      if (!row) throw notFound('endpoint');
      return { status: 200, body: present(row) };
    },
  );
  routes.add(
    {
      method: 'patch',
      path: '/v1/endpoints/:id',
      operationId: 'updateEndpoint',
      summary: 'Change an endpoint; `status: active` re-enables a disabled one',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      body: patchEndpointBody,
      success: { status: 200, description: 'The updated endpoint', schema: endpointSchema },
      errors: [404],
    },
    async ({ params, body, scope }) => {
      withinRetention(body.retryPolicy ?? undefined);
      const row = await updateEndpoint(scope, params.id, { ...body, url: body.url === undefined ? undefined : validUrl(body.url) });
      if (!row) throw notFound('endpoint');
      return { status: 200, body: present(row) };
    },
  );
  routes.add(
    {
      method: 'delete',
      path: '/v1/endpoints/:id',
      operationId: 'deleteEndpoint',
      summary: 'Delete an endpoint; its waiting deliveries are dead-lettered',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 204, description: 'Deleted' },
      errors: [404],
    },
    async ({ params, scope }) => {
      if (!(await ctx.lifecycle.deleteEndpoint(scope, params.id))) throw notFound('endpoint');
      return { status: 204 };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id/secret',
      operationId: 'getEndpointSecret',
      summary: 'Show the current signing secret (and, during a rotation, when the previous one stops signing); audited, never cached',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      portalCapability: 'manage',
      params: idParams,
      success: { status: 200, description: 'The current secret', schema: currentSecretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const revealed = await revealEndpointSecret(scope, ctx.box, params.id);
      if (!revealed) throw notFound('endpoint');
      return {
        status: 200,
        headers: { 'cache-control': 'no-store' },
        body: { secret: revealed.secret, previousSecretExpiresAt: revealed.previousSecretExpiresAt?.toISOString() ?? null },
      };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints/:id/secret/rotate',
      operationId: 'rotateEndpointSecret',
      summary: 'Rotate the signing secret; the old one keeps signing beside the new one for 24 h',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      success: { status: 200, description: 'The new secret, and until when the previous one keeps signing', schema: secretSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const secret = generateWebhookSecret();
      const previousSecretExpiresAt = await rotateEndpointSecret(scope, ctx.box, params.id, secret);
      if (!previousSecretExpiresAt) throw notFound('endpoint');
      return { status: 200, body: { secret, previousSecretExpiresAt: previousSecretExpiresAt.toISOString() } };
    },
  );
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
      if (since >= until) problems.push({ path: 'since', message: 'must be before until' });
      else if (until.getTime() - since.getTime() > maxStatsWindowDays * 24 * hourMs) {
        problems.push({ path: 'since', message: `the window may span at most ${maxStatsWindowDays} days` });
      }
      if (problems.length > 0) throw new ValidationError(problems);
      const row = await getEndpoint(scope, params.id);
      if (!row) throw notFound('endpoint');
      // Deliveries made up to the longest maximum event age before the window may be attempted in it.
      const lookbackSeconds = Math.max(ctx.config.retry.maxEventAgeSeconds, effectiveRetryPolicy(row).maxEventAgeSeconds);
      return { status: 200, body: await endpointStats(scope, row.id, { since, until, lookbackSeconds }) };
    },
  );
}
