import { OpenAPIRegistry } from '@asteasolutions/zod-to-openapi';
import express, { type Express } from 'express';
import { notFound } from '../domain/errors.js';
import { adminAuth, tenantAuth } from './auth.js';
import type { ApiContext } from './context.js';
import { errorHandler } from './errors.js';
import { jsonBody } from './json-body.js';
import { tenantRateLimit } from './rate-limit.js';
import { ApiRoutes } from './route.js';
import { adminRoutes } from './routes/admin.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { deliveryRoutes } from './routes/deliveries.js';
import { endpointRoutes } from './routes/endpoints.js';
import { eventRoutes } from './routes/events.js';
import { inboundMetrics, inboundRawBody, inboundRoutes } from './routes/inbound.js';
import { opsRoutes } from './routes/ops.js';
import { portalSessionRoutes } from './routes/portal-sessions.js';
import { portalAssets } from './portal-assets.js';
import { replayRoutes } from './routes/replays.js';
import { sourceRoutes } from './routes/sources.js';
import { summaryRoutes } from './routes/summaries.js';

/** Request bodies of the management API (tenant and admin routes); provider callbacks use MAX_BODY_BYTES. */
import { tracingOn } from '../infra/tracing.js';
import { serverSpans } from './server-spans.js';

export const API_BODY_LIMIT_BYTES = 1024 * 1024;

/** The API role's app (also role `all`); the worker role serves its operations routes without it (ops/ops-http.ts). */
export function createApp(ctx: ApiContext, opts: { portalAssetsDir?: string } = {}): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('trust proxy', false);
  app.set('query parser', 'simple');
  // No client of this API sends If-None-Match; an ETag would hash every response body for nothing.
  app.set('etag', false);
  if (tracingOn()) app.use(serverSpans());

  const json = jsonBody(API_BODY_LIMIT_BYTES);
  const registry = new OpenAPIRegistry();
  const routes = new ApiRoutes(registry, {
    none: [],
    link: [json],
    admin: [adminAuth(ctx.config.adminToken), json],
    tenant: [tenantAuth(ctx.platformDb, ctx.config.adminToken, ctx.reads), tenantRateLimit(ctx.redis, ctx.config.tenantRateLimitPerSecond, ctx.config.queuePrefix), json],
    signature: [inboundMetrics(ctx.intake), inboundRawBody(ctx.config.maxBodyBytes)],
  });
  // First: the router tries routes in order, and provider callbacks are most of the traffic.
  inboundRoutes(routes, ctx);
  adminRoutes(routes, ctx);
  apiKeyRoutes(routes, ctx);
  sourceRoutes(routes, ctx);
  endpointRoutes(routes, ctx);
  eventRoutes(routes, ctx);
  deliveryRoutes(routes);
  summaryRoutes(routes);
  replayRoutes(routes, ctx);
  portalSessionRoutes(routes, ctx);
  opsRoutes(routes, ctx, registry);

  app.use(routes.router);
  app.use(portalAssets(ctx.config.portal, opts.portalAssetsDir));
  app.use((req, _res, next) => next(notFound(`route ${req.method} ${req.path}`)));
  app.use(errorHandler(ctx.logger));
  return app;
}
