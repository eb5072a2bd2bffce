import { z } from 'zod';
import { notFound, ValidationError } from '../../domain/errors.js';
import { checkTargetUrl } from '../../outbound/address-guard.js';
import { getAdapter } from '../../inbound/adapters/index.js';
import { paginate } from '../../store/pagination.js';
import { deleteSource, findSource, insertSource, listSourcesQuery, rowToSource, updateSource, type SourceRow } from '../../store/sources-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { createSourceBody, idParams, page, pageQuery, patchSourceBody, sourceSchema } from '../schemas.js';

export function sourceRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const base = ctx.config.publicBaseUrl;
  // Reconciliation polls baseUrl with the tenant's provider API key: it is a tenant-chosen
  // target like an endpoint URL, so the same SSRF rules apply before it is stored.
  const checkReconcileTarget = (baseUrl: string) => {
    const check = checkTargetUrl(baseUrl, { allowPrivate: ctx.config.allowPrivateTargets, production: ctx.config.nodeEnv === 'production' });
    if (!check.ok) throw new ValidationError([{ path: 'reconcile.baseUrl', message: check.message }], check.code);
  };
  routes.add(
    {
      method: 'post',
      path: '/v1/sources',
      operationId: 'createSource',
      summary: 'Register a provider source; a missing secret is generated and returned once',
      tag: 'sources',
      auth: 'tenant',
      body: createSourceBody,
      success: { status: 201, description: 'Created', schema: sourceSchema },
    },
    async ({ body, scope }) => {
      if (body.reconcile) checkReconcileTarget(body.reconcile.baseUrl);
      const generated = body.secret === undefined;
      const secret = body.secret ?? getAdapter(body.type).generateSecret();
      const row = await insertSource(scope, ctx.box, { type: body.type, name: body.name, secret, reconcile: body.reconcile, hmac: body.hmac });
      return { status: 201, body: { ...rowToSource(row, base), ...(generated ? { secret } : {}) } };
    },
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/sources',
      operationId: 'listSources',
      reads: 'replica',
      summary: 'List sources',
      tag: 'sources',
      auth: 'tenant',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of sources', schema: page(sourceSchema) },
    },
    async ({ query, scope }) => ({
      status: 200,
      body: await paginate(listSourcesQuery(scope), 'sources.id', query, (r: SourceRow) => rowToSource(r, base)),
    }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/sources/:id',
      operationId: 'getSource',
      summary: 'Get a source',
      tag: 'sources',
      auth: 'tenant',
      params: idParams,
      success: { status: 200, description: 'The source', schema: sourceSchema },
      errors: [404],
    },
    async ({ params, scope }) => {
      const row = await findSource(scope, params.id);
      if (!row) throw notFound('source');
      return { status: 200, body: rowToSource(row, base) };
    },
  );
  routes.add(
    {
      method: 'patch',
      path: '/v1/sources/:id',
      operationId: 'updateSource',
      summary: 'Rename a source, change its reconciliation, or give it a new secret (the previous one keeps verifying for 24 h)',
      tag: 'sources',
      auth: 'tenant',
      params: idParams,
      body: patchSourceBody,
      success: { status: 200, description: 'The source as changed; previousSecretExpiresAt says until when the old secret verifies', schema: sourceSchema },
      errors: [404],
    },
    async ({ params, body, scope }) => {
      if (body.reconcile) checkReconcileTarget(body.reconcile.baseUrl);
      const row = await updateSource(scope, ctx.box, params.id, body);
      if (!row) throw notFound('source');
      ctx.intake.forgetSource(row.id);
      return { status: 200, body: rowToSource(row, base) };
    },
  );
  routes.add(
    {
      method: 'delete',
      path: '/v1/sources/:id',
      operationId: 'deleteSource',
      summary: 'Delete a source: its inbound URL answers 404 from then on; its events and receipts stay queryable',
      tag: 'sources',
      auth: 'tenant',
      params: idParams,
      success: { status: 204, description: 'Deleted' },
      errors: [404],
    },
    async ({ params, scope }) => {
      if (!(await deleteSource(scope, params.id))) throw notFound('source');
      ctx.intake.forgetSource(params.id);
      return { status: 204 };
    },
  );
}
