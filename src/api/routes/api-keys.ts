import { z } from 'zod';
import { conflict, notFound } from '../../domain/errors.js';
import { issueApiKey, listApiKeys, revokeApiKey } from '../../store/api-keys-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { apiKeyCreated, apiKeySchema, createApiKeyBody, idParams, page, pageQuery } from '../schemas.js';

/**
 * A tenant's own API keys. A key is shown once, on creation; the list shows its name and first
 * characters only. A revoked key answers 401 on every process within a second (see auth.ts).
 */
export function apiKeyRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  routes.add(
    {
      method: 'post',
      path: '/v1/api-keys',
      operationId: 'createApiKey',
      summary: 'Create an API key for this tenant (the key is shown once)',
      tag: 'api-keys',
      auth: 'tenant',
      body: createApiKeyBody,
      success: { status: 201, description: 'Created; the key is in this answer only', schema: apiKeyCreated },
    },
    async ({ body, scope }) => ({ status: 201, body: await issueApiKey(scope, body.name) }),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/api-keys',
      operationId: 'listApiKeys',
      reads: 'replica',
      summary: "List this tenant's live API keys (never the keys themselves)",
      tag: 'api-keys',
      auth: 'tenant',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of API keys', schema: page(apiKeySchema) },
    },
    async ({ query, scope }) => ({ status: 200, body: await listApiKeys(scope, query) }),
  );
  routes.add(
    {
      method: 'delete',
      path: '/v1/api-keys/:id',
      operationId: 'revokeApiKey',
      summary: 'Revoke an API key, the calling one included; refused for the last live key',
      tag: 'api-keys',
      auth: 'tenant',
      params: idParams,
      success: { status: 204, description: 'Revoked: the key answers 401 on every process within 1 s' },
      errors: [404, 409],
    },
    async ({ params, scope }) => {
      const result = await revokeApiKey(scope, params.id);
      if (result === 'not_found') throw notFound('API key');
      if (result === 'last_key') {
        throw conflict('last_api_key', 'this is the last live API key of the tenant; create another one (POST /v1/api-keys) before revoking it');
      }
      return { status: 204 };
    },
  );
}
