/**
 * Each role loads only what it runs (docs/architecture.md, "Role-specific imports"): `src/main.ts
 * <role>` is started for real in a child process with a loader hook that records every module it
 * resolves (test/helpers/module-log.mjs), and the list is read once the process is ready. The api
 * role is the control: it must show the very modules the worker must not, so a hook that recorded
 * nothing, or paths spelled differently, fail here instead of passing.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startPlatformProcess } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { clearRedisPrefix, eventually, testEnv } from '../helpers/platform.js';

/** What the API alone needs: its express app, routes, route schemas and OpenAPI registry. */
const apiOnly: Array<[string, RegExp]> = [
  ['the API app', /\/src\/api\/app\.ts$/],
  ['an API route module', /\/src\/api\/routes\/[^/]+\.ts$/],
  ['the route schemas', /\/src\/api\/schemas\.ts$/],
  ['express', /\/node_modules\/express\//],
  ['zod-to-openapi', /\/node_modules\/@asteasolutions\/zod-to-openapi\//],
];
/** What the worker alone needs: BullMQ's worker and the delivery path. */
const workerOnly: Array<[string, RegExp]> = [
  ['the dispatcher', /\/src\/outbound\/dispatcher\.ts$/],
  ['bullmq', /\/node_modules\/bullmq\//],
];

const dir = mkdtempSync(join(tmpdir(), 'whr-role-imports-'));
const queuePrefix = `trole${randomBytes(4).toString('hex')}`;
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
  await clearRedisPrefix(queuePrefix);
  rmSync(dir, { recursive: true, force: true });
});

/** Starts the role with the module log, waits until it answers /readyz, stops it, returns what it loaded. */
async function modulesLoadedBy(role: 'api' | 'worker'): Promise<string[]> {
  const log = join(dir, `${role}.log`);
  const env = testEnv(database.url, { QUEUE_PREFIX: queuePrefix, LOG_LEVEL: 'info', ENV_FILE: join(dir, '.env'), MODULE_LOG: log });
  // After tsx, so the hook sees the .ts files tsx resolves to (the child runs in the repository root).
  const child = startPlatformProcess(role, env, ['--import', './test/helpers/module-log.mjs']);
  try {
    const port = await child.port();
    await eventually(async () => (await request(`http://127.0.0.1:${port}`, 'GET', '/readyz')).status === 200, `${role} ready`, 20_000, 100);
  } finally {
    child.kill('SIGTERM');
    await child.exited;
  }
  return readFileSync(log, 'utf8').split('\n').filter(Boolean);
}

const loaded = (modules: string[], pattern: RegExp) => modules.filter((url) => pattern.test(url));

describe('modules each role loads', { timeout: 90_000 }, () => {
  it('the worker loads neither express nor the API routes, schemas and OpenAPI registry', async () => {
    const modules = await modulesLoadedBy('worker');
    for (const [what, pattern] of workerOnly) expect(loaded(modules, pattern).length, `worker loads ${what}`).toBeGreaterThan(0);
    for (const [what, pattern] of apiOnly) expect(loaded(modules, pattern), `worker must not load ${what}`).toEqual([]);
  });

  it('the api loads them (the control), and not the worker-only modules', async () => {
    const modules = await modulesLoadedBy('api');
    for (const [what, pattern] of apiOnly) expect(loaded(modules, pattern).length, `api loads ${what}`).toBeGreaterThan(0);
    for (const [what, pattern] of workerOnly) expect(loaded(modules, pattern), `api must not load ${what}`).toEqual([]);
  });
});
