import { createTenant } from '../../store/tenants-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { createTenantBody, tenantCreated } from '../schemas.js';

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
    async ({ body }) => ({ status: 201, body: await createTenant(ctx.db, body.name) }),
  );
}
