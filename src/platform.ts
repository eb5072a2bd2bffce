import { once } from 'node:events';
import { createServer, type RequestListener, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Knex } from 'knex';
import type { Logger } from 'pino';
import { ConfigError, type Config } from './config/index.js';
import { checkSecretsKey } from './store/secrets-key-check.js';
import { DeliveryLifecycle, warmDispatch, type LifecycleEffects } from './delivery/index.js';
import { SecretBox } from './domain/secret-box.js';
import { lockTableFitFor } from './domain/lock-table.js';
import type { Dispatcher } from './outbound/dispatcher.js';
import type { DeliveryClient, LookupFn } from './outbound/http-client.js';
import { tracingOn } from './infra/tracing.js';
import { IntakeService } from './inbound/intake-service.js';
import { emitDeliveriesDead, emitEndpointDisabled, emitEndpointFailing, emitEndpointHeld } from './ops/platform-events.js';
import type { Reconciler } from './ops/reconciler.js';
import { Retention } from './ops/retention.js';
import { coalesced } from './infra/coalesce.js';
import { createDb, warmPool, warmUpsAtOnce } from './infra/db.js';
import type { WarmUp } from './infra/sql.js';
import { createLogger } from './infra/logger.js';
import { ReadReplica } from './infra/read-replica.js';
import { connectRedis, type RedisClient } from './infra/redis.js';
import { metrics, setBacklogSource } from './metrics/registry.js';
import { backlogSnapshot } from './store/backlog-store.js';
import { lockTableState } from './store/health-store.js';
import { warmPublish } from './store/events-store.js';
import { warmIntake } from './store/intake-store.js';

export type Role = 'all' | 'api' | 'worker';

/** Largest request line plus header block the HTTP server reads (Node's default, made explicit). */
export const MAX_HEADER_BYTES = 16 * 1024;

export interface PlatformOptions {
  role: Role;
  config: Config;
  logger?: Logger;
  /** Redis key prefix (default: config.queuePrefix): lets parallel test files share one Redis without sharing queues. */
  queuePrefix?: string;
  lookup?: LookupFn;
  /** Where the built portal is served from (default: portal/dist at the repository root). */
  portalAssetsDir?: string;
}

export interface Platform {
  url: string;
  port: number;
  /** Requests and dispatch; the server cancels a statement before the client stops waiting. */
  db: Knex;
  /** Retention's own pool, which the server does not cancel. */
  maintenanceDb: Knex;
  redis: RedisClient;
  lifecycle: DeliveryLifecycle;
  dispatcher?: Dispatcher;
  reconciler?: Reconciler;
  retention: Retention;
  stop(): Promise<void>;
}

/**
 * The composition root: the one place that builds and wires every part for a role. `api` serves the
 * HTTP API; `worker` dispatches and serves only operations routes (/metrics, /healthz, /readyz);
 * `all` does both in one process and hands new work to the dispatcher directly.
 *
 * What only one role uses is imported when that role is built (`await import`), never at the top
 * of this file: a worker loads neither express nor the API's routes, schemas and OpenAPI registry,
 * and an api process loads neither BullMQ's worker nor the delivery client (docs/architecture.md,
 * "Role-specific imports"; test/integration/role-imports.test.ts holds it).
 */
export async function startPlatform(opts: PlatformOptions): Promise<Platform> {
  const { config, role } = opts;
  const logger = opts.logger ?? createLogger(config.logLevel);
  const prefix = opts.queuePrefix ?? config.queuePrefix;
  // A channel is not a key: on a cluster every node relays a PUBLISH to its subscribers, whatever
  // the name, so the channel needs no hash tag.
  const wakeChannel = `${prefix}:wake`;
  const { db, maintenanceDb, redis, box, retention } = await openStorage(config, role, logger);
  const reads = await openReadReplica(config, role, db, logger);

  // New work wakes this process's dispatcher directly, or (api role) the workers through Redis. An api
  // process announces at most once per Redis round trip: a worker's admission round takes everything
  // committed before it, so announcements made meanwhile need one more, not one each.
  let dispatcher: Dispatcher | undefined;
  const announceWork = coalesced(() => redis.publish(wakeChannel, '1'));
  const lifecycle = buildLifecycle(config, db, logger, () => (dispatcher ? dispatcher.wake() : announceWork()));
  let subscriber: RedisClient | undefined;
  if (role !== 'api') ({ dispatcher, subscriber } = await buildDispatcher(opts, { db, lifecycle, box, logger, prefix, wakeChannel }));

  const maxAge = config.retry.maxEventAgeSeconds;
  const intake = new IntakeService({ db, box, defaultMaxAgeSeconds: maxAge, batching: config.intakeBatching, fannedOut: (r) => lifecycle.fannedOut(r) });
  const app =
    role === 'worker'
      ? (await import('./ops/ops-http.js')).opsListener({ platformDb: db, redis, logger })
      : (await import('./api/app.js')).createApp({ config, platformDb: db, reads, redis, box, intake, logger, lifecycle }, { portalAssetsDir: opts.portalAssetsDir });
  const polling = role === 'api' ? undefined : await buildReconciler(opts, { db, box, intake, logger });

  const server = createHttpServer(config, app);
  // Dispatch is running, its queue connections made, before the process answers anything: a
  // fresh process's first events otherwise waited for them (latency.coldP99Ms). If the port then
  // cannot be had, stop() below stops it again.
  dispatcher?.start();
  await dispatcher?.ready();
  server.listen(config.port, '0.0.0.0');
  const listenFailure = await once(server, 'listening').then(() => undefined, (err: unknown) => err);
  const stop = shutdown({ server, dispatcher, reconciler: polling?.reconciler, reconcileClient: polling?.client, retention, subscriber, redis, reads, db, maintenanceDb });
  if (listenFailure !== undefined) {
    // Everything built so far is let go of, so the process can exit with the one line below.
    await stop();
    throw cannotListen(listenFailure, config.port);
  }
  // The reconciler starts once the port is ours: a process that cannot serve has it to stop.
  polling?.reconciler.start();
  const port = (server.address() as AddressInfo).port;
  logger.info({ role, port }, 'listening');
  return { url: `http://127.0.0.1:${port}`, port, db, maintenanceDb, redis, lifecycle, dispatcher, reconciler: polling?.reconciler, retention, stop };
}

/** The statements each role runs per event or per attempt: run once on every new pooled connection. */
const hotStatements: Record<Role, readonly WarmUp[]> = {
  api: [warmIntake, warmPublish],
  worker: [warmDispatch],
  // The dispatch warm-up publishes too.
  all: [warmIntake, warmDispatch],
};

/**
 * Connects to PostgreSQL and Redis, checks that SECRETS_KEY opens the stored secrets, and makes
 * sure the partitions intake writes into exist before anything is served. DB_POOL_MIN connections
 * are opened and warmed before the server listens (warm start: a fresh process holds its p99 from
 * its first second; docs/performance.md, latency.coldP99Ms).
 */
async function openStorage(config: Config, role: Role, logger: Logger) {
  const db = createDb({ url: config.databaseUrl, poolMax: config.dbPoolMax, poolMin: config.dbPoolMin, cancelOnServer: true, warmUps: hotStatements[role], logger });
  const redis = connectRedis(config, 'request');
  redis.on('error', (err) => logger.debug({ err }, 'redis connection error'));
  const box = new SecretBox(config.secretsKey);
  setBacklogSource(() => backlogSnapshot(db));
  // Intake, and each pooled connection's warm-up, need today's partitions: created (if missing)
  // before the first pooled connection, then kept ahead hourly; the worker role also removes what
  // has expired.
  // Retention's statements grow with a partition's rows, so it has a pool of its own that the server
  // does not cancel (DbOptions.cancelOnServer): one that finishes after its client stopped waiting
  // is still progress.
  const maintenanceDb = createDb({ url: config.databaseUrl, poolMax: 2, logger });
  const retention = new Retention({ db: maintenanceDb, policy: config.retention, logger });
  try {
    await retention.ensureAhead();
    await checkSecretsKey(db, box);
  } catch (err) {
    redis.disconnect();
    await Promise.all([db.destroy(), maintenanceDb.destroy()]);
    throw err;
  }
  const warmed = await warmPool(db, config.dbPoolMin, warmUpsAtOnce);
  if (warmed.refused) {
    logger.warn({ err: warmed.refused, opened: warmed.opened, wanted: config.dbPoolMin }, 'opened only part of the database pool: starting with those connections');
  }
  retention.start({ remove: role !== 'api' });
  if (role !== 'api') {
    await warnWithoutAutovacuum(db, logger).catch((err: unknown) => logger.debug({ err }, 'could not read the autovacuum setting'));
    await warnIfLockTableSmall(db, config, logger).catch((err: unknown) => logger.debug({ err }, 'could not read the lock table settings'));
  }
  return { db, maintenanceDb, redis, box, retention };
}

/**
 * Dispatch leaves two or three row versions per delivery; with autovacuum off server-wide nothing
 * reclaims them, and every hand-off walks more of them: an 8-minute stream's p99 grew from 70 to
 * 263 ms on such a server and stayed at 10 ms with it on (docs/performance.md, "A long stream and
 * autovacuum"). Said once, at start, by the roles that dispatch.
 */
async function warnWithoutAutovacuum(db: Knex, logger: Logger): Promise<void> {
  const { rows } = await db.raw<{ rows: Array<{ autovacuum: string }> }>('SHOW autovacuum');
  if (rows[0]?.autovacuum !== 'off') return;
  logger.warn('autovacuum is off on this PostgreSQL server: dead row versions of deliveries pile up and latency grows with them; turn it on (docs/operations/postgres.md)');
}

/**
 * The hot statements' cached plans lock every partition of `events` each time they run, so the lock
 * table a server needs grows with the partitions kept; past it, statements fail with "out of shared
 * memory" (docs/operations/postgres.md). Said once, at start, by the roles that dispatch.
 */
async function warnIfLockTableSmall(db: Knex, config: Config, logger: Logger): Promise<void> {
  const { eventPartitions: held, ...settings } = await lockTableState(db);
  const fit = lockTableFitFor(held, config.retention, settings);
  if (fit.holds >= fit.needs) return;
  logger.warn(
    { ...settings, eventPartitions: fit.eventPartitions, lockTableHolds: fit.holds, lockTableNeeds: fit.needs, maxLocksPerTransactionNeeded: fit.maxLocksPerTransaction },
    `PostgreSQL's lock table is too small for ${fit.eventPartitions} partitions of events: busy connections would fail with "out of shared memory"; ` +
      `set max_locks_per_transaction to at least ${fit.maxLocksPerTransaction} (a restart is needed; docs/operations/postgres.md)`,
  );
}

/**
 * The read replica (DATABASE_READ_URL) for the API's reads that tolerate lag, with its lag sampler.
 * The worker role serves no such reads, so it opens no replica pool.
 */
async function openReadReplica(config: Config, role: Role, db: Knex, logger: Logger): Promise<ReadReplica> {
  const settings = role === 'worker' ? undefined : config.readReplica;
  const reads = new ReadReplica({
    primary: db,
    replica: settings && createDb({ url: settings.url, poolMax: config.dbPoolMax, cancelOnServer: true, logger }),
    maxLagSeconds: settings?.maxLagSeconds ?? 0,
    logger,
    onLag: (seconds) => metrics.readReplicaLag.set(seconds),
    onFallback: (reason) => metrics.readFallbacks.inc({ reason }),
  });
  await reads.start();
  return reads;
}

/** The delivery lifecycle with its side effects: metrics, operational events, wake-ups. */
function buildLifecycle(config: Config, db: Knex, logger: Logger, newWork: () => void): DeliveryLifecycle {
  const maxAge = config.retry.maxEventAgeSeconds;
  const effects: LifecycleEffects = {
    deadLettered: (reason, count) => metrics.deadLettered.inc({ reason }, count),
    announceDead: (ids) => emitDeliveriesDead(db, ids, maxAge),
    announceEndpointDisabled: (endpoint) => emitEndpointDisabled(db, endpoint, maxAge),
    announceEndpointFailing: (endpoint) => emitEndpointFailing(db, endpoint, maxAge),
    // The pause or resume has committed and answers the tenant's request: an event that cannot be
    // published is logged, not turned into a failed request.
    announceEndpointHeld: (change) =>
      emitEndpointHeld(db, change, maxAge).catch((err: unknown) => {
        logger.error({ err, endpointId: change.id }, `platform.endpoint.${change.kind} not published`);
        return { pending: 0, deadDisabled: 0 };
      }),
    newWork,
  };
  return new DeliveryLifecycle(db, effects, {
    queuedLeaseSeconds: config.queuedLeaseSeconds,
    circuitFailureThreshold: config.circuitFailureThreshold,
    circuitCooldownSeconds: config.circuitCooldownSeconds,
    perEndpointBatch: 500,
    defaultMaxAttempts: config.retry.maxAttempts,
    autoDisableAfterSeconds: config.autoDisableAfterSeconds,
  });
}

/**
 * The dispatcher on a Redis connection of its own; in the worker role also the subscriber that
 * hears the api processes announce new work.
 */
async function buildDispatcher(
  opts: PlatformOptions,
  parts: { db: Knex; lifecycle: DeliveryLifecycle; box: SecretBox; logger: Logger; prefix: string; wakeChannel: string },
): Promise<{ dispatcher: Dispatcher; subscriber?: RedisClient }> {
  const { config, role } = opts;
  const { db, lifecycle, box, logger, prefix, wakeChannel } = parts;
  const [{ Dispatcher }, { endpointHeadersFrom }] = await Promise.all([
    import('./outbound/dispatcher.js'),
    import('./outbound/endpoint-headers.js'),
  ]);
  const connection = connectRedis(config, 'worker');
  connection.on('error', (err) => logger.debug({ err }, 'redis queue connection error'));
  const endpointHeaders = endpointHeadersFrom(db, box);
  const dispatcher = new Dispatcher({ config, lifecycle, box, logger, connection, queuePrefix: prefix, lookup: opts.lookup, endpointHeaders, tracing: tracingOn() });
  if (role !== 'worker') return { dispatcher };
  // API processes announce new work here; polling covers any announcement that is lost. A
  // cluster client subscribes on one node and moves to another when that node goes away.
  const subscriber = connectRedis(config, 'worker');
  subscriber.on('error', (err) => logger.debug({ err }, 'redis subscriber error'));
  subscriber.on('message', () => dispatcher.wake());
  void subscriber.subscribe(wakeChannel).catch((err: unknown) => logger.warn({ err }, 'wake subscription failed'));
  return { dispatcher, subscriber };
}

/** Polling of providers for messages their callbacks left unfinished, with an HTTP client of its own. */
async function buildReconciler(
  opts: PlatformOptions,
  parts: { db: Knex; box: SecretBox; intake: IntakeService; logger: Logger },
): Promise<{ reconciler: Reconciler; client: DeliveryClient }> {
  const { config } = opts;
  const [{ Reconciler }, { createDeliveryClient }] = await Promise.all([import('./ops/reconciler.js'), import('./outbound/http-client.js')]);
  // Provider polling goes through the same SSRF guard as deliveries: baseUrl is tenant input.
  const client = createDeliveryClient({
    allowPrivateTargets: config.allowPrivateTargets,
    proxy: config.egressProxy,
    connectTimeoutMs: config.connectTimeoutMs,
    attemptTimeoutMs: Math.min(config.attemptTimeoutMs, 10_000),
    maxResponseBytes: 16 * 1024,
    excerptBytes: 16 * 1024,
    lookup: opts.lookup,
  });
  const reconciler = new Reconciler({ ...parts, client, intervalSeconds: config.reconcileIntervalSeconds });
  return { reconciler, client };
}

function createHttpServer(config: Config, app: RequestListener): Server {
  // Slow or stalled clients cannot hold a connection forever (slow-loris): the headers must arrive
  // within headersTimeout and the whole request within requestTimeout, or Node answers 408 and
  // closes. Node enforces both only when it sweeps its connections, every
  // connectionsCheckingInterval (30 s by default, which would let a slow client stay up to 30 s
  // past its deadline), so the sweep runs every second. The header block is capped at Node's
  // 16 KiB (431 above it). See docs/security.md.
  const server = createServer(
    {
      headersTimeout: config.httpHeadersTimeoutMs,
      requestTimeout: config.httpRequestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, config.httpHeadersTimeoutMs),
      maxHeaderSize: MAX_HEADER_BYTES,
    },
    app,
  );
  server.keepAliveTimeout = 5_000;
  return server;
}

/** What `stop()` lets go of, in order; calling it again returns the same promise. */
function shutdown(parts: {
  server: Server;
  dispatcher?: Dispatcher;
  reconciler?: Reconciler;
  reconcileClient?: DeliveryClient;
  retention: Retention;
  subscriber?: RedisClient;
  redis: RedisClient;
  reads: ReadReplica;
  db: Knex;
  maintenanceDb: Knex;
}): () => Promise<void> {
  const { server, dispatcher, reconciler, reconcileClient, retention, subscriber, redis, reads, db, maintenanceDb } = parts;
  let stopping: Promise<void> | undefined;
  return () =>
    (stopping ??= (async () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      // The dispatcher stops taking work at once, not after a retention or reconcile run in progress
      // has finished: work published after the signal is left to the processes that go on.
      await Promise.all([
        dispatcher?.stop(),
        (async () => {
          await reconciler?.stop();
          await retention.stop();
          await reconcileClient?.close();
        })(),
      ]);
      await subscriber?.quit().catch(() => undefined);
      await closed;
      setBacklogSource(undefined);
      await redis.quit().catch(() => undefined);
      await reads.stop();
      await Promise.all([db.destroy(), maintenanceDb.destroy()]);
    })());
}

/**
 * The port cannot be had: a configuration problem, told in one line that names PORT (main prints a
 * ConfigError without a stack), instead of Node's EADDRINUSE trace.
 */
function cannotListen(err: unknown, port: number): ConfigError {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === 'EADDRINUSE') return new ConfigError(`PORT ${port} is already in use by another process; stop it, or set PORT to a free port`);
  if (code === 'EACCES') return new ConfigError(`PORT ${port} needs privileges this process does not have; set PORT to a port above 1023`);
  return new ConfigError(`cannot listen on PORT ${port}: ${typeof code === 'string' ? code : String(err)}`);
}
