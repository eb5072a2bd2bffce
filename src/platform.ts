import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Redis } from 'ioredis';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { createApp } from './api/app.js';
import type { Config } from './config/index.js';
import { SecretBox } from './domain/secret-box.js';
import { Dispatcher } from './dispatch/dispatcher.js';
import { createDeliveryClient, type DeliveryClient, type LookupFn } from './dispatch/http-client.js';
import { IntakeService } from './inbound/intake-service.js';
import { Reconciler } from './ops/reconciler.js';
import { createDb } from './infra/db.js';
import { createLogger } from './infra/logger.js';
import { createRedis } from './infra/redis.js';
import { setBacklogSource } from './metrics/registry.js';
import { backlogSnapshot } from './store/sweep-store.js';

export type Role = 'all' | 'api' | 'worker';

export interface PlatformOptions {
  role: Role;
  config: Config;
  logger?: Logger;
  /** Redis key prefix (default: config.queuePrefix): lets parallel test files share one Redis without sharing queues. */
  queuePrefix?: string;
  lookup?: LookupFn;
}

export interface Platform {
  url: string;
  port: number;
  db: Knex;
  redis: Redis;
  dispatcher?: Dispatcher;
  reconciler?: Reconciler;
  stop(): Promise<void>;
}

/**
 * The composition root: the one place that builds and wires every part for a role. `api` serves the
 * HTTP API; `worker` dispatches and serves only operations routes (/metrics, /healthz, /readyz);
 * `all` does both in one process and hands new work to the dispatcher directly.
 */
export async function startPlatform(opts: PlatformOptions): Promise<Platform> {
  const { config, role } = opts;
  const logger = opts.logger ?? createLogger(config.logLevel);
  const prefix = opts.queuePrefix ?? config.queuePrefix;
  const wakeChannel = `${prefix}:wake`;
  const db = createDb({ url: config.databaseUrl, poolMax: config.dbPoolMax });
  const redis = createRedis(config.redisUrl, 'request');
  redis.on('error', (err) => logger.debug({ err }, 'redis connection error'));
  const box = new SecretBox(config.secretsKey);
  setBacklogSource(() => backlogSnapshot(db));

  let dispatcher: Dispatcher | undefined;
  let subscriber: Redis | undefined;
  if (role !== 'api') {
    dispatcher = new Dispatcher({ config, db, box, logger, connection: createRedis(config.redisUrl, 'worker'), queuePrefix: prefix, lookup: opts.lookup });
    dispatcher.start();
    if (role === 'worker') {
      // API processes announce new work here; polling covers any announcement that is lost.
      subscriber = createRedis(config.redisUrl, 'worker');
      subscriber.on('error', (err) => logger.debug({ err }, 'redis subscriber error'));
      subscriber.on('message', () => dispatcher?.wake());
      void subscriber.subscribe(wakeChannel).catch((err: unknown) => logger.warn({ err }, 'wake subscription failed'));
    }
  }
  const onWork = dispatcher ? dispatcher.wake : () => void redis.publish(wakeChannel, '1').catch(() => undefined);
  const intake = new IntakeService({ db, box, defaultMaxAgeSeconds: config.retry.maxEventAgeSeconds, onWork });
  const app = createApp({ config, db, redis, box, intake, logger, onWork }, { opsOnly: role === 'worker' });
  let reconciler: Reconciler | undefined;
  let reconcileClient: DeliveryClient | undefined;
  if (role !== 'api') {
    // Provider polling goes through the same SSRF guard as deliveries: baseUrl is tenant input.
    reconcileClient = createDeliveryClient({
      allowPrivateTargets: config.allowPrivateTargets,
      connectTimeoutMs: config.connectTimeoutMs,
      attemptTimeoutMs: Math.min(config.attemptTimeoutMs, 10_000),
      maxResponseBytes: 16 * 1024,
      excerptBytes: 16 * 1024,
      lookup: opts.lookup,
    });
    reconciler = new Reconciler({ db, box, intake, client: reconcileClient, logger, intervalSeconds: config.reconcileIntervalSeconds });
    reconciler.start();
  }

  const server: Server = app.listen(config.port, '0.0.0.0');
  await once(server, 'listening');
  // Slow or stalled clients cannot hold a connection forever (slow-loris).
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  server.keepAliveTimeout = 5_000;
  const port = (server.address() as AddressInfo).port;
  logger.info({ role, port }, 'listening');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await reconciler?.stop();
      await reconcileClient?.close();
      await dispatcher?.stop();
      await subscriber?.quit().catch(() => undefined);
      await closed;
      setBacklogSource(undefined);
      await redis.quit().catch(() => undefined);
      await db.destroy();
    })());
  return { url: `http://127.0.0.1:${port}`, port, db, redis, dispatcher, reconciler, stop };
}
