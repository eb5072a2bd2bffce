import type { Express } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/api/app.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { IntakeService } from '../../src/inbound/intake-service.js';
import { createLogger } from '../../src/infra/logger.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

type Schema = { $ref?: string; type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; enum?: unknown[]; maximum?: number; anyOf?: Schema[] };
interface Operation {
  operationId?: string;
  security?: Array<Record<string, unknown>>;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: Schema }>;
  requestBody?: { required?: boolean; content: Record<string, { schema: Schema }> };
  responses: Record<string, unknown>;
}
interface OpenApiDocument {
  openapi: string;
  paths: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
}

interface Layer {
  route?: { path: string; methods: Record<string, boolean> };
  handle: { stack?: Layer[] };
  slash?: boolean;
}

/** Every method + path the express app answers, walked from its router stack (nested routers included). */
function registeredRoutes(app: Express): string[] {
  const found: string[] = [];
  const walk = (stack: Layer[]) => {
    for (const layer of stack) {
      if (layer.route) {
        for (const [method, on] of Object.entries(layer.route.methods)) if (on) found.push(`${method} ${layer.route.path}`);
      } else if (layer.handle.stack) {
        // Route paths are only complete if routers are mounted at the root; fail loudly otherwise.
        expect(layer.slash, 'a nested router mounted below the root').toBe(true);
        walk(layer.handle.stack);
      }
    }
  };
  walk((app as unknown as { router: { stack: Layer[] } }).router.stack);
  return found;
}

/**
 * GET /openapi.json documents every route the app serves, from the same zod schemas that validate
 * requests. The route list comes from the express app itself, so an undocumented route fails here.
 */
describe('OpenAPI document', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let doc: OpenApiDocument;
  let app: Express;

  const resolve = (schema: Schema): Schema => {
    if (!schema.$ref) return schema;
    const name = schema.$ref.replace('#/components/schemas/', '');
    return doc.components!.schemas![name]!;
  };
  const bodySchema = (method: string, path: string): Schema => {
    const op = doc.paths[path]?.[method];
    expect(op?.requestBody, `${method} ${path} request body`).toBeDefined();
    return resolve(op!.requestBody!.content['application/json']!.schema);
  };

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('openapi');
    const res = await t.call('GET', '/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body as OpenApiDocument;
    // The same app the platform serves, built from the platform's own pieces (routes are fixed at build time).
    const box = new SecretBox(t.config.secretsKey);
    const ctx = { config: t.config, platformDb: t.platform.db, redis: t.platform.redis, box, logger: createLogger('silent'), lifecycle: t.platform.lifecycle };
    app = createApp({ ...ctx, intake: new IntakeService({ db: ctx.platformDb, box, defaultMaxAgeSeconds: t.config.retry.maxEventAgeSeconds, fannedOut: (r) => ctx.lifecycle.fannedOut(r) }) });
  });
  afterAll(async () => {
    await t.stop();
  });

  it('is OpenAPI 3.1', () => {
    expect(doc.openapi).toMatch(/^3\.1\./);
    expect(Object.keys(doc.paths).length).toBeGreaterThan(10);
  });

  it('documents every registered express route, and documents nothing the app does not serve', () => {
    const routes = registeredRoutes(app);
    expect(routes).toContain('post /v1/replays');
    expect(routes).toContain('get /v1/messages/:messageId');
    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((method) => `${method} ${path}`));
    const asOpenApi = routes.map((r) => r.replace(/:([A-Za-z0-9_]+)/g, '{$1}'));
    expect(documented.sort()).toEqual([...new Set(asOpenApi)].sort());
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) expect(Object.keys(op.responses).length, `${method} ${path} responses`).toBeGreaterThan(0);
    }
  });

  it('gives request bodies schemas: POST /v1/endpoints, /v1/events and /v1/replays', () => {
    const endpoint = bodySchema('post', '/v1/endpoints');
    expect(endpoint.required).toEqual(['url']);
    expect(Object.keys(endpoint.properties!)).toEqual(expect.arrayContaining(['url', 'eventTypes', 'maxConcurrency', 'rateLimitPerSecond', 'retryPolicy']));
    expect(endpoint.properties!.maxConcurrency).toMatchObject({ type: 'integer', maximum: 1000 });

    const event = bodySchema('post', '/v1/events');
    expect(event.required).toEqual(expect.arrayContaining(['type', 'data']));
    expect(Object.keys(event.properties!)).toEqual(expect.arrayContaining(['type', 'messageId', 'data']));

    const replay = bodySchema('post', '/v1/replays');
    expect(replay.required).toEqual(['reason']);
    expect(Object.keys(replay.properties!)).toEqual(expect.arrayContaining(['filter', 'reason', 'limit', 'dryRun']));
    const filter = resolve(replay.properties!.filter!);
    expect(Object.keys(filter.properties!)).toEqual(expect.arrayContaining(['status', 'endpointId', 'eventType', 'reason', 'since', 'until']));
    expect(resolve(filter.properties!.status!).enum).toEqual(['succeeded', 'dead']);

    const single = bodySchema('post', '/v1/deliveries/{id}/replay');
    expect(single.required).toEqual(['reason']);
  });

  it('matches what the server accepts, because the same schemas validate requests', async () => {
    // The documented bounds are the enforced ones.
    const tooMany = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/x', maxConcurrency: 1001 } });
    expect(tooMany.status).toBe(400);
    const atMax = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/x', maxConcurrency: 1000 } });
    expect(atMax.status).toBe(201);
    // A documented enum value is accepted, anything else refused.
    const statuses = resolve(resolve(bodySchema('post', '/v1/replays').properties!.filter!).properties!.status!).enum as string[];
    for (const status of statuses) {
      expect((await tenant.call('POST', '/v1/replays', { body: { filter: { status }, reason: 'r', dryRun: true } })).status).toBe(200);
    }
    expect((await tenant.call('POST', '/v1/replays', { body: { filter: { status: 'pending' }, reason: 'r', dryRun: true } })).status).toBe(400);
    // A required field left out is refused.
    expect((await tenant.call('POST', '/v1/replays', { body: { dryRun: true } })).status).toBe(400);
  });

  const operations = () => Object.entries(doc.paths).flatMap(([path, ops]) => Object.entries(ops).map(([method, op]) => ({ path, method, op })));

  it('names every operation with a unique operationId', () => {
    const ids = operations().map(({ op }) => op.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/v1/endpoints']!.post!.operationId).toBe('createEndpoint');
  });

  it('declares Idempotency-Key as a header parameter and every request body as required, but those that may be left out', () => {
    expect(doc.paths['/v1/events']!.post!.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false }));
    const withBody = operations().filter(({ op }) => op.requestBody);
    expect(withBody.length).toBeGreaterThan(5);
    // Pause and resume take an optional reason, and are called without a body as often as with one.
    const optional = new Set(['pauseEndpoint', 'resumeEndpoint']);
    for (const { path, method, op } of withBody) expect(op.requestBody!.required, `${method} ${path}`).toBe(!optional.has(op.operationId!));
  });

  it('documents 400, 401, 413, 415, 429 and 503 on every tenant route, and both successes where there are two', () => {
    const tenantRoutes = operations().filter(({ op }) => op.security?.some((s) => 'apiKey' in s));
    expect(tenantRoutes.length).toBeGreaterThan(15);
    for (const { path, method, op } of tenantRoutes) {
      expect(Object.keys(op.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['400', '401', '413', '415', '429', '503']));
    }
    expect(Object.keys(doc.paths['/v1/events']!.post!.responses)).toEqual(expect.arrayContaining(['200', '202']));
    expect(Object.keys(doc.paths['/v1/replays']!.post!.responses)).toEqual(expect.arrayContaining(['200', '202']));
    // Every operation documents a client error, so a generated client knows the error shape.
    for (const { path, method, op } of operations()) expect(Object.keys(op.responses).some((s) => s.startsWith('4')), `${method} ${path}`).toBe(true);
  });

  it('documents the status of each answer the server actually gives', async () => {
    const seen: Array<[string, string, number]> = [];
    const call = async (method: string, path: string, template: string, opts: Parameters<TestTenant['call']>[2] = {}) => {
      const res = await tenant.call(method, path, opts);
      seen.push([method.toLowerCase(), template, res.status]);
      return res;
    };
    await call('POST', '/v1/replays', '/v1/replays', { body: { reason: 'check', dryRun: true } });
    await call('POST', '/v1/replays', '/v1/replays', { body: { reason: 'check' } });
    const event = { body: { type: 'doc.checked', data: {} }, headers: { 'idempotency-key': 'documented-statuses' } };
    await call('POST', '/v1/events', '/v1/events', event);
    await call('POST', '/v1/events', '/v1/events', event);
    await call('POST', '/v1/events', '/v1/events', { rawBody: JSON.stringify({ type: 'x', data: 'y'.repeat(1024 * 1024) }), headers: { 'content-type': 'application/json' } });
    await call('POST', '/v1/endpoints', '/v1/endpoints', { rawBody: '{}', headers: { 'content-type': 'text/plain' } });
    await call('GET', '/v1/endpoints?unknown=1', '/v1/endpoints');
    await call('GET', '/v1/events/evt_missing', '/v1/events/{id}');
    expect(seen.map(([, , status]) => status)).toEqual([200, 202, 202, 200, 413, 415, 400, 404]);
    for (const [method, path, status] of seen) expect(doc.paths[path]![method]!.responses[String(status)], `${method} ${path} ${status}`).toBeDefined();
  });
});
