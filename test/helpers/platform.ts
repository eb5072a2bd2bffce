import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { loadConfig, type Config } from '../../src/config/index.js';
import { createLogger } from '../../src/infra/logger.js';
import type { LookupFn } from '../../src/outbound/http-client.js';
import { startPlatform, type Platform, type Role } from '../../src/platform.js';
import { createTestDatabase, type TestDatabase } from './database.js';
import { request, type ApiResponse, type RequestOptions } from './http.js';

export const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Environment for a test process: real services, loopback receivers allowed, fast timers. */
export function testEnv(databaseUrl: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    PORT: '0',
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    ADMIN_TOKEN: 'test-admin-token-0123456789abcdef',
    SECRETS_KEY: randomBytes(32).toString('base64'),
    ALLOW_PRIVATE_TARGETS: 'true',
    LOG_LEVEL: 'silent',
    SWEEP_INTERVAL_MS: '200',
    QUEUED_LEASE_SECONDS: '3',
    RETRY_BASE_DELAY_MS: '100',
    RETRY_MAX_DELAY_MS: '1000',
    ATTEMPT_TIMEOUT_MS: '2000',
    CONNECT_TIMEOUT_MS: '1000',
    // Many platforms share one test server (PostgreSQL's default max_connections, 100): each
    // platform started with this environment opens 4 connections, not its whole pool, and grows
    // when it needs to.
    DB_POOL_MIN: String(Math.min(4, Number(overrides.DB_POOL_MAX ?? 4))),
    ...overrides,
  };
}

export interface TestTenant {
  id: string;
  apiKey: string;
  call<T = any>(method: string, path: string, opts?: Omit<RequestOptions, 'token'>): Promise<ApiResponse<T>>;
}

export interface TestPlatform {
  platform: Platform;
  config: Config;
  env: Record<string, string>;
  database: TestDatabase;
  queuePrefix: string;
  url: string;
  call<T = any>(method: string, path: string, opts?: RequestOptions): Promise<ApiResponse<T>>;
  createTenant(name?: string): Promise<TestTenant>;
  stop(): Promise<void>;
}

export interface TestPlatformOptions {
  role?: Role;
  env?: Record<string, string>;
  /** Reuse a database (e.g. to restart the platform on the same data). */
  database?: TestDatabase;
  queuePrefix?: string;
  logs?: NodeJS.WritableStream;
  /** DNS for outbound deliveries (e.g. names that fail, hang or resolve to loopback); IP literals skip it. */
  lookup?: LookupFn;
  /** Where the platform serves the portal from (default: portal/dist). */
  portalAssetsDir?: string;
}

export async function startTestPlatform(opts: TestPlatformOptions = {}): Promise<TestPlatform> {
  const database = opts.database ?? (await createTestDatabase());
  const env = testEnv(database.url, opts.env);
  const config = loadConfig(env);
  const queuePrefix = opts.queuePrefix ?? `t${randomBytes(4).toString('hex')}`;
  // Captured logs default to info; an explicit LOG_LEVEL (e.g. trace, to capture everything) wins.
  const logger = createLogger(opts.logs ? (opts.env?.LOG_LEVEL ?? 'info') : config.logLevel, opts.logs);
  const platform = await startPlatform({ role: opts.role ?? 'all', config, logger, queuePrefix, lookup: opts.lookup, portalAssetsDir: opts.portalAssetsDir });
  const call = <T = any>(method: string, path: string, o?: RequestOptions) => request<T>(platform.url, method, path, o);
  return {
    platform,
    config,
    env,
    database,
    queuePrefix,
    url: platform.url,
    call,
    async createTenant(name = 'tenant') {
      const res = await call('POST', '/admin/tenants', { token: config.adminToken, body: { name } });
      if (res.status !== 201) throw new Error(`tenant creation failed: ${res.status} ${res.text}`);
      const { id, apiKey } = res.body as { id: string; apiKey: string };
      return { id, apiKey, call: (method, path, o) => call(method, path, { ...o, token: apiKey }) };
    },
    async stop() {
      await platform.stop();
      if (!opts.database) await database.drop();
      await clearRedisPrefix(queuePrefix);
    },
  };
}

export async function clearRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/** Polls until `check` returns a truthy value or the time runs out (then throws with `what`). */
export async function eventually<T>(check: () => Promise<T | undefined | false | null>, what: string, timeoutMs = 15_000, stepMs = 50): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
