import type { Express } from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/api/app.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { IntakeService } from '../../src/inbound/intake-service.js';
import { createLogger } from '../../src/infra/logger.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

type Schema = { $ref?: string; type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; enum?: unknown[]; maximum?: number; anyOf?: Schema[] };
interface Operation {
  requestBody?: { content: Record<string, { schema: Schema }> };
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
    const ctx = { config: t.config, db: t.platform.db, redis: t.platform.redis, box, logger: createLogger('silent'), lifecycle: { fannedOut: () => undefined, endpointDeleted: () => undefined, replayed: () => undefined } };
    app = createApp({ ...ctx, intake: new IntakeService({ db: ctx.db, box, defaultMaxAgeSeconds: t.config.retry.maxEventAgeSeconds, fannedOut: ctx.lifecycle.fannedOut }) });
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
    expect(resolve(filter.properties!.status!).enum).toEqual(['dead', 'succeeded']);

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
});
