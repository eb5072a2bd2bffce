import type { Request } from 'express';
import { z } from 'zod';
import { notFound, ValidationError, ValidationProblems } from '../../domain/errors.js';
import { compileEventFilter } from '../../domain/event-filter.js';
import { parseExactJson } from '../../domain/exact-json.js';
import { maxAgeProblem } from '../../domain/retention.js';
import { generateSigningSecret, type SignatureScheme } from '../../domain/signing.js';
import { checkTargetUrl } from '../../outbound/address-guard.js';
import { getEndpoint, insertEndpoint, listEndpoints, type EndpointRow } from '../../store/endpoints-store.js';
import type { TenantScope } from '../../store/tenant-scope.js';
import type { ApiContext } from '../context.js';
import { rawJsonMember } from '../json-body.js';
import type { ApiRoutes } from '../route.js';
import { createEndpointBody, endpointSchema, idParams, page, pageQuery, patchEndpointBody } from '../schemas.js';
import { endpointBackfillRoutes } from './endpoint-backfill.js';
import { endpointInsightRoutes } from './endpoint-insight.js';
import { endpointSecretRoutes } from './endpoint-secret.js';
import { endpointStatusRoutes } from './endpoint-status.js';
import { assertMayChangeEndpoint, presentEndpoint } from './endpoint-view.js';

/** Every /v1/endpoints route: the endpoint itself here, its status, secret, insight (test, stats) and backfill beside. */
export function endpointRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  endpointCrudRoutes(routes, ctx);
  endpointStatusRoutes(routes, ctx);
  endpointSecretRoutes(routes, ctx);
  endpointInsightRoutes(routes, ctx);
  endpointBackfillRoutes(routes, ctx);
}

/** Create, list, get, change and delete an endpoint. */
function endpointCrudRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const validUrl = (url: string) => {
    const check = checkTargetUrl(url, { allowPrivate: ctx.config.allowPrivateTargets, production: ctx.config.nodeEnv === 'production' });
    if (!check.ok) throw new ValidationError([{ path: 'url', message: check.message }], check.code, check.message);
    return check.url.toString();
  };
  // An endpoint's deliveries may not outlive the data retention keeps (see src/domain/retention.ts).
  const withinRetention = (policy: { maxEventAgeSeconds?: number } | undefined) => {
    const problem = policy?.maxEventAgeSeconds === undefined ? undefined : maxAgeProblem(policy.maxEventAgeSeconds, ctx.config.retention);
    if (problem) throw new ValidationError([{ path: 'retryPolicy.maxEventAgeSeconds', message: problem }]);
  };
  const present = (row: EndpointRow) => presentEndpoint(ctx.config, ctx.box, row);
  // Validated by the schema as parsed; compiled from the text as written, so its numbers keep every digit.
  const exactFilter = (req: Request, filter: unknown) => {
    if (filter === undefined || filter === null) return filter;
    const text = rawJsonMember(req, 'filter').text;
    const compiled = compileEventFilter(parseExactJson(text));
    if (!compiled.ok) throw new ValidationError(compiled.problems);
    return { text, path: compiled.path };
  };
  // The scheme is fixed at creation: a receiver verifying v1 cannot verify v1a, so a change would
  // break it at once; a new endpoint (or a rotation within the scheme) is the way. Sending the same scheme is a no-op.
  const sameSignatureScheme = async (scope: TenantScope, id: string, scheme: SignatureScheme | undefined) => {
    if (scheme === undefined) return;
    const row = await getEndpoint(scope, id);
    if (!row) throw notFound('endpoint');
    if (row.signature_scheme !== scheme) {
      const message = `the signature scheme is fixed at creation (this endpoint's is ${row.signature_scheme}); create a new endpoint to change it, or rotate its secret within the scheme`;
      throw new ValidationError([{ path: 'signature.scheme', message }]);
    }
  };
  // A client certificate is only ever presented over TLS: tls with an http URL (sent now, or
  // already stored beside the other) is refused rather than silently unused.
  const tlsNeedsHttps = async (scope: TenantScope, id: string | undefined, body: { url?: string; tls?: unknown }) => {
    if (body.url === undefined && (body.tls === undefined || body.tls === null)) return;
    let url = body.url;
    let hasTls = body.tls !== undefined && body.tls !== null;
    if (id !== undefined && (url === undefined || body.tls === undefined)) {
      const row = await getEndpoint(scope, id);
      if (!row) throw notFound('endpoint');
      url ??= row.url;
      if (body.tls === undefined) hasTls = row.tls_enc !== null;
    }
    if (hasTls && url !== undefined && !url.toLowerCase().startsWith('https:')) {
      throw new ValidationError([{ path: 'tls', message: 'mutual TLS needs an https url' }]);
    }
  };
  const tag = 'endpoints';

  routes.add(
    {
      method: 'post',
      path: '/v1/endpoints',
      operationId: 'createEndpoint',
      summary: 'Register an endpoint; its signing secret is returned once (hmac), or its public key is shown (ed25519)',
      tag,
      auth: 'tenant',
      portal: 'tenant-wide',
      body: createEndpointBody,
      success: { status: 201, description: 'Created', schema: endpointSchema },
    },
    async ({ req, body, scope }) => {
      const problems = new ValidationProblems();
      await problems.check(() => withinRetention(body.retryPolicy));
      await problems.check(() => tlsNeedsHttps(scope, undefined, body));
      const url = await problems.check(() => validUrl(body.url));
      const filter = await problems.check(() => exactFilter(req, body.filter));
      problems.throwIfAny();
      const { secret, publicKey } = generateSigningSecret(body.signature?.scheme ?? 'hmac');
      const input = { ...body, url: url!, filter };
      const row = await insertEndpoint(scope, ctx.box, input, secret, ctx.config.endpointMaxConcurrency);
      // An ed25519 endpoint's private key stays with the platform: the view carries its public key.
      return { status: 201, body: publicKey === null ? { ...present(row), secret } : present(row) };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints',
      operationId: 'listEndpoints',
      reads: 'replica',
      summary: 'List endpoints',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of endpoints', schema: page(endpointSchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await listEndpoints(scope, query).then((p) => ({ ...p, data: p.data.map(present) })),
    }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/endpoints/:id',
      operationId: 'getEndpoint',
      reads: 'replica-when-read-only',
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
      summary: 'Change an endpoint; `status: paused` pauses it, `status: active` resumes or re-enables it',
      tag,
      auth: 'tenant',
      portal: 'scoped',
      params: idParams,
      body: patchEndpointBody,
      success: { status: 200, description: 'The updated endpoint', schema: endpointSchema },
      errors: [404],
    },
    async ({ req, params, body, scope }) => {
      await assertMayChangeEndpoint(scope, params.id, body.eventTypes);
      const problems = new ValidationProblems();
      await problems.check(() => withinRetention(body.retryPolicy ?? undefined));
      await problems.check(() => sameSignatureScheme(scope, params.id, body.signature?.scheme));
      await problems.check(() => tlsNeedsHttps(scope, params.id, body));
      const url = body.url === undefined ? undefined : await problems.check(() => validUrl(body.url!));
      const filter = await problems.check(() => exactFilter(req, body.filter));
      problems.throwIfAny();
      const input = { ...body, url, filter };
      const row = await ctx.lifecycle.updateEndpoint(scope, ctx.box, params.id, input);
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
      await assertMayChangeEndpoint(scope, params.id);
      if (!(await ctx.lifecycle.deleteEndpoint(scope, params.id))) throw notFound('endpoint');
      return { status: 204 };
    },
  );
}
