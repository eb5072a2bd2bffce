import { z } from 'zod';
import { notFound } from '../../domain/errors.js';
import { issueApiKey, listApiKeys } from '../../store/api-keys-store.js';
import { TenantScope } from '../../store/tenant-scope.js';
import { createTenant, findTenant, listTenants } from '../../store/tenants-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { apiKeyCreated, createApiKeyBody, createTenantBody, idParams, page, pageQuery, tenantCreated, tenantDetailSchema, tenantSchema } from '../schemas.js';

/** A tenant's live keys shown in its detail; a tenant with more pages them through its own API. */
const keysShown = 100;

export function adminRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  routes.add(
    {
      method: 'post',
      path: '/admin/tenants',
      operationId: 'createTenant',
      summary: 'Create a tenant and its first API key (shown once)',
      tag: 'admin',
      auth: 'admin',
      body: createTenantBody,
      success: { status: 201, description: 'Created', schema: tenantCreated },
    },
    async ({ body }) => ({ status: 201, body: await createTenant(ctx.platformDb, body.name) }),
  );
  routes.add(
    {
      method: 'get',
      path: '/admin/tenants',
      operationId: 'listTenants',
      summary: 'List tenants, newest first',
      tag: 'admin',
      auth: 'admin',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of tenants', schema: page(tenantSchema) },
    },
    async ({ query }) => ({ status: 200, body: await listTenants(ctx.platformDb, query) }),
  );
  routes.add(
    {
      method: 'get',
      path: '/admin/tenants/:id',
      operationId: 'getTenant',
      summary: 'Get a tenant with its live API keys (names and prefixes, never the keys)',
      tag: 'admin',
      auth: 'admin',
      params: idParams,
      success: { status: 200, description: 'The tenant', schema: tenantDetailSchema },
      errors: [404],
    },
    async ({ params }) => {
      const tenant = await findTenant(ctx.platformDb, params.id);
      if (!tenant) throw notFound('tenant');
      const keys = await listApiKeys(TenantScope.forAdmin(ctx.platformDb, tenant.id), { limit: keysShown });
      return { status: 200, body: { ...tenant, apiKeys: keys.data } };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/admin/tenants/:id/api-keys',
      operationId: 'createTenantApiKey',
      summary: 'Create an API key for a tenant (shown once), e.g. for a tenant that lost its keys',
      tag: 'admin',
      auth: 'admin',
      params: idParams,
      body: createApiKeyBody,
      success: { status: 201, description: 'Created; the key is in this answer only', schema: apiKeyCreated },
      errors: [404],
    },
    async ({ params, body }) => {
      const tenant = await findTenant(ctx.platformDb, params.id);
      if (!tenant) throw notFound('tenant');
      return { status: 201, body: await issueApiKey(TenantScope.forAdmin(ctx.platformDb, tenant.id), body.name) };
    },
  );
}
