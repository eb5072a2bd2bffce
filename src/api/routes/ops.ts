import { OpenApiGeneratorV31, type OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';
import { renderMetrics } from '../../metrics/registry.js';
import { readinessReply } from '../../ops/ops-http.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';

export function opsRoutes(routes: ApiRoutes, ctx: ApiContext, registry: OpenAPIRegistry): void {
  const tag = 'operations';
  let document: ReturnType<typeof openApiDocument> | undefined;
  routes.add(
    { method: 'get', path: '/healthz', operationId: 'getHealth', summary: 'The process is up', tag, auth: 'none', success: { status: 200, description: 'Up', schema: z.object({ status: z.literal('ok') }) } },
    async () => ({ status: 200, body: { status: 'ok' } }),
  );
  routes.add(
    {
      method: 'get',
      path: '/readyz',
      operationId: 'getReadiness',
      summary: 'PostgreSQL and Redis are reachable',
      tag,
      auth: 'none',
      success: { status: 200, description: 'Ready', schema: z.object({ status: z.string(), database: z.boolean(), redis: z.boolean() }) },
      errors: [503],
    },
    async () => readinessReply(ctx),
  );
  routes.add(
    { method: 'get', path: '/metrics', operationId: 'getMetrics', summary: 'Prometheus metrics', tag, auth: 'none', success: { status: 200, description: 'Prometheus text format, or OpenMetrics (with exemplars) when the Accept header asks for it' } },
    async ({ req, res }) => {
      const { contentType, body } = await renderMetrics(req.headers.accept);
      res.setHeader('content-type', contentType);
      res.status(200).send(body);
      return { status: 200 };
    },
  );
  routes.add(
    { method: 'get', path: '/openapi.json', operationId: 'getOpenApiDocument', summary: 'This document', tag, auth: 'none', success: { status: 200, description: 'OpenAPI 3.1' } },
    async () => {
      document ??= openApiDocument(registry, ctx.config.publicBaseUrl);
      return { status: 200, body: document };
    },
  );
}

/**
 * The OpenAPI 3.1 document of every registered route. Its server is the path of PUBLIC_BASE_URL,
 * relative to where the document is served (OpenAPI resolves it against the document's own URL):
 * right for every deployment, behind a path prefix too, without naming a host the document
 * cannot know. The API is not published under an open licence: the package is private.
 */
export function openApiDocument(registry: OpenAPIRegistry, publicBaseUrl: string) {
  const basePath = new URL(publicBaseUrl).pathname.replace(/\/+$/, '') || '/';
  registry.registerComponent('securitySchemes', 'apiKey', { type: 'http', scheme: 'bearer', description: 'Tenant API key' });
  registry.registerComponent('securitySchemes', 'adminToken', { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' });
  return new OpenApiGeneratorV31(registry.definitions).generateDocument({
    openapi: '3.1.0',
    info: {
      title: 'Webhook relay',
      version: '1.0.0',
      description: 'Durable webhook intake and signed at-least-once delivery.',
      license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
    },
    servers: [{ url: basePath, description: 'This deployment: the host that serves this document' }],
  });
}
