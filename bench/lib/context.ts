import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchConfig } from './config.js';
import { startPlatform, type PlatformProcess, type PlatformSettings, type Role } from './children.js';
import { truncateAll } from './database.js';
import type { Receiver } from './receiver.js';

/** What every scenario gets from the orchestrator. */
export interface BenchContext {
  config: BenchConfig;
  settings: PlatformSettings;
  /** The bench's own connection to the bench database (setup, bulk inserts, verification). */
  db: Knex;
  redis: Redis;
  receiver: Receiver;
  log(message: string): void;
}

/**
 * Every scenario starts from empty tables, an empty Redis prefix and zeroed receiver counters.
 * `keepTables` leaves the database as it is, for a measurement on rows the scenario set up itself.
 */
export async function resetState(ctx: BenchContext, { keepTables = false } = {}): Promise<void> {
  if (!keepTables) await truncateAll(ctx.db);
  await clearRedisPrefix(ctx.redis, ctx.settings.queuePrefix);
  await ctx.receiver.reset();
}

export async function clearRedisPrefix(redis: Redis, prefix: string): Promise<void> {
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.del(...keys);
  } while (cursor !== '0');
}

/** Runs setup through a short-lived api process, so no platform process is left running afterwards. */
export async function withSetupApi<T>(ctx: BenchContext, work: (api: PlatformProcess) => Promise<T>): Promise<T> {
  const api = await startPlatform(ctx.settings, 'api', { env: ctx.config.platformEnv });
  try {
    return await work(api);
  } finally {
    await api.stop();
  }
}

export async function startMeasured(
  ctx: BenchContext,
  role: Role,
  profileName: string,
  env: Record<string, string> = {},
): Promise<PlatformProcess> {
  return startPlatform(ctx.settings, role, { env: { ...ctx.config.platformEnv, ...env }, ...(ctx.config.cpuProf && { profileName }) });
}

/** Polls `check` until it returns a value, or fails with `what` after `timeoutMs`. */
export async function waitUntil<T>(check: () => Promise<T | undefined | false>, what: string, timeoutMs: number, stepMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(stepMs);
  }
}
