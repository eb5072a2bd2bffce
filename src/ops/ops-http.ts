import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { notFound } from '../domain/errors.js';
import { redisServing, type RedisClient } from '../infra/redis.js';
import { within } from '../infra/within.js';
import { renderMetrics } from '../metrics/registry.js';
import { pingDatabase } from '../store/health-store.js';

export interface ReadinessDeps {
  platformDb: Knex;
  redis: RedisClient;
}

/** Readiness answers quickly either way: a probe that hangs is worse than one that says no. */
export async function checkReadiness(deps: ReadinessDeps): Promise<{ database: boolean; redis: boolean }> {
  const [database, redis] = await Promise.all([
    within(2_000, pingDatabase(deps.platformDb)).then(() => true, () => false),
    within(2_000, redisServing(deps.redis)).catch(() => false),
  ]);
  return { database, redis };
}

/** GET /readyz's status and body, the same for the API's router and the worker's listener. */
export async function readinessReply(deps: ReadinessDeps): Promise<{ status: number; body: { status: string; database: boolean; redis: boolean } }> {
  const checks = await checkReadiness(deps);
  const ready = checks.database && checks.redis;
  return { status: ready ? 200 : 503, body: { status: ready ? 'ready' : 'unavailable', ...checks } };
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/**
 * The worker role's HTTP listener: /healthz, /readyz and /metrics on plain node:http, so a worker
 * loads neither express nor the API's routes and their OpenAPI registry (docs/architecture.md,
 * "Role-specific imports"). The API serves the same three paths through its router (api/routes/ops.ts)
 * with the same answers; anything else here is the contract's 404.
 */
export function opsListener(deps: ReadinessDeps & { logger: Logger }): RequestListener {
  const routes: Record<string, (res: ServerResponse, req: IncomingMessage) => Promise<void>> = {
    '/healthz': async (res) => sendJson(res, 200, { status: 'ok' }),
    '/readyz': async (res) => {
      const { status, body } = await readinessReply(deps);
      sendJson(res, status, body);
    },
    '/metrics': async (res, req) => {
      const { contentType, body } = await renderMetrics(req.headers.accept);
      res.writeHead(200, { 'content-type': contentType });
      res.end(body);
    },
  };
  return (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    const route = req.method === 'GET' || req.method === 'HEAD' ? routes[path] : undefined;
    if (!route) {
      const { status, code, message } = notFound(`route ${req.method ?? ''} ${path}`);
      sendJson(res, status, { error: { code, message } });
      return;
    }
    route(res, req).catch((err: unknown) => {
      deps.logger.error({ err, method: req.method, path }, 'request failed');
      if (!res.headersSent) sendJson(res, 500, { error: { code: 'internal_error', message: 'internal error' } });
      else res.destroy();
    });
  };
}
