import { envSchema, type ParsedEnv } from './env-schema.js';
import type { ClusterNode } from '../infra/redis.js';
import { maxAgeProblem, type RetentionPolicy } from '../domain/retention.js';
import type { RetryPolicy } from '../domain/retry-policy.js';

export interface EgressProxy {
  /** http://[user:pass@]host:port; the credentials must never be logged. */
  url: string;
  /** EGRESS_NO_PROXY entries, lower-cased. */
  noProxy: string[];
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export interface Config {
  nodeEnv: ParsedEnv['NODE_ENV'];
  port: number;
  databaseUrl: string;
  /** A streaming replica for reads that tolerate lag, and the lag past which they go to the primary. */
  readReplica?: { url: string; maxLagSeconds: number };
  redisUrl: string;
  /** Seed nodes of a Redis Cluster: set, the platform uses the cluster and not `redisUrl`'s host. */
  redisClusterNodes?: ClusterNode[];
  adminToken: string;
  secretsKey: Buffer;
  publicBaseUrl: string;
  allowPrivateTargets: boolean;
  /** The forward proxy deliveries leave through, and the targets that bypass it (see http-client.ts). */
  egressProxy?: EgressProxy;
  logLevel: ParsedEnv['LOG_LEVEL'];
  maxBodyBytes: number;
  httpHeadersTimeoutMs: number;
  httpRequestTimeoutMs: number;
  retry: RetryPolicy;
  retention: RetentionPolicy;
  attemptTimeoutMs: number;
  connectTimeoutMs: number;
  endpointMaxConcurrency: number;
  workerConcurrency: number;
  /** `always`: share admitted work through Redis even when this is the only worker (see docs/architecture.md). */
  shareViaRedis: 'auto' | 'always';
  /** Late work's pace while live work waits longer than usual (src/outbound/backlog-pacing.ts). */
  backlogPacing: { targetMs: number; minPerSecond: number };
  circuitFailureThreshold: number;
  circuitCooldownSeconds: number;
  autoDisableAfterSeconds: number;
  sweepIntervalMs: number;
  queuedLeaseSeconds: number;
  reconcileIntervalSeconds: number;
  replayMaxLimit: number;
  replayRatePerSecond: number;
  dbPoolMax: number;
  /** Pooled connections opened and warmed before the process reports ready, and kept while idle. */
  dbPoolMin: number;
  /** Group commit at intake: callbacks per statement, statements in flight at once. */
  intakeBatching: { maxBatch: number; maxInFlight: number };
  tenantRateLimitPerSecond: number;
  queuePrefix: string;
  /** Number of job queues (BullMQ), each in its own hash slot (see src/outbound/job-queue.ts). */
  queueShards: number;
  /** The portal page: who may frame it, and the name and colour it shows. */
  portal: { frameAncestors: string; brandName: string; accentColor: string };
}

/**
 * Shards when QUEUE_SHARDS is unset. A single Redis gains nothing from more than one queue, and one
 * keeps its keys where they always were. On a cluster, 16 shards spread evenly over up to 16
 * masters (see shardPrefixes), and by five or six each over the common three.
 */
const defaultShards = { single: 1, cluster: 16 };

/**
 * Validates the environment and fails on the first bad variable with a one-line message naming it.
 * A bad value never falls back to the default: a typo in production must stop the process.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const input = Object.fromEntries(
    Object.keys(envSchema.shape).flatMap((k) => (env[k] === undefined || env[k] === '' ? [] : [[k, env[k]]])),
  );
  const parsed = envSchema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${String(issue.path[0])}: ${issue.message}`);
  }
  const e = parsed.data;
  if (!e.ADMIN_TOKEN) throw new ConfigError('invalid configuration: ADMIN_TOKEN: required');
  if (!e.SECRETS_KEY) throw new ConfigError('invalid configuration: SECRETS_KEY: required');
  // Node refuses a server whose headers may take longer than the whole request.
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError('invalid configuration: HTTP_HEADERS_TIMEOUT_MS: must not exceed HTTP_REQUEST_TIMEOUT_MS');
  }
  const retention = { retentionDays: e.RETENTION_DAYS, deadLetterRetentionDays: e.DEAD_LETTER_RETENTION_DAYS, auditRetentionDays: e.AUDIT_RETENTION_DAYS };
  const maxAge = maxAgeProblem(e.MAX_EVENT_AGE_SECONDS, retention);
  if (maxAge) throw new ConfigError(`invalid configuration: MAX_EVENT_AGE_SECONDS: ${maxAge}`);
  if (e.DB_POOL_MIN !== undefined && e.DB_POOL_MIN > e.DB_POOL_MAX) throw new ConfigError(`invalid configuration: DB_POOL_MIN: must not exceed DB_POOL_MAX (${e.DB_POOL_MAX})`);
  if (e.INTAKE_STATEMENTS_IN_FLIGHT > e.DB_POOL_MAX) {
    // More would only wait for a connection, holding batches that could have grown meanwhile.
    throw new ConfigError(`invalid configuration: INTAKE_STATEMENTS_IN_FLIGHT: must not exceed DB_POOL_MAX (${e.DB_POOL_MAX})`);
  }
  const queueShards = e.QUEUE_SHARDS ?? (e.REDIS_CLUSTER_NODES ? defaultShards.cluster : defaultShards.single);
  // Each shard's BullMQ worker takes at least one of this process's slots (src/outbound/dispatcher.ts).
  if (queueShards > e.WORKER_CONCURRENCY) {
    const given = e.QUEUE_SHARDS === undefined ? ` (${queueShards}, the default on a cluster)` : '';
    throw new ConfigError(`invalid configuration: QUEUE_SHARDS${given}: must not exceed WORKER_CONCURRENCY (${e.WORKER_CONCURRENCY})`);
  }
  return {
    nodeEnv: e.NODE_ENV,
    port: e.PORT,
    databaseUrl: e.DATABASE_URL,
    readReplica: e.DATABASE_READ_URL === undefined ? undefined : { url: e.DATABASE_READ_URL, maxLagSeconds: e.READ_REPLICA_MAX_LAG_SECONDS },
    redisUrl: e.REDIS_URL,
    redisClusterNodes: e.REDIS_CLUSTER_NODES,
    adminToken: e.ADMIN_TOKEN,
    secretsKey: Buffer.from(e.SECRETS_KEY, 'base64'),
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    allowPrivateTargets: e.ALLOW_PRIVATE_TARGETS,
    egressProxy: e.EGRESS_PROXY_URL === undefined ? undefined : { url: e.EGRESS_PROXY_URL, noProxy: e.EGRESS_NO_PROXY ?? [] },
    logLevel: e.LOG_LEVEL,
    maxBodyBytes: e.MAX_BODY_BYTES,
    httpHeadersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS,
    httpRequestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS,
    retention,
    retry: {
      maxAttempts: e.RETRY_MAX_ATTEMPTS,
      baseDelayMs: e.RETRY_BASE_DELAY_MS,
      maxDelayMs: e.RETRY_MAX_DELAY_MS,
      maxEventAgeSeconds: e.MAX_EVENT_AGE_SECONDS,
      retryAfterMaxSeconds: e.RETRY_AFTER_MAX_SECONDS,
    },
    attemptTimeoutMs: e.ATTEMPT_TIMEOUT_MS,
    connectTimeoutMs: e.CONNECT_TIMEOUT_MS,
    endpointMaxConcurrency: e.ENDPOINT_MAX_CONCURRENCY,
    workerConcurrency: e.WORKER_CONCURRENCY,
    shareViaRedis: e.SHARE_VIA_REDIS,
    backlogPacing: { targetMs: e.BACKLOG_PACING_TARGET_MS, minPerSecond: e.BACKLOG_PACING_MIN_PER_SECOND },
    circuitFailureThreshold: e.CIRCUIT_FAILURE_THRESHOLD,
    circuitCooldownSeconds: e.CIRCUIT_COOLDOWN_SECONDS,
    autoDisableAfterSeconds: e.AUTO_DISABLE_AFTER_SECONDS,
    sweepIntervalMs: e.SWEEP_INTERVAL_MS,
    queuedLeaseSeconds: e.QUEUED_LEASE_SECONDS,
    reconcileIntervalSeconds: e.RECONCILE_INTERVAL_SECONDS,
    replayMaxLimit: e.REPLAY_MAX_LIMIT,
    replayRatePerSecond: e.REPLAY_RATE_PER_SECOND,
    dbPoolMax: e.DB_POOL_MAX,
    // Opened whole by default: a pool that grows under load opens and warms its connections at the
    // moment a burst arrives, all at once (docs/performance.md, "A burst's first second").
    dbPoolMin: e.DB_POOL_MIN ?? e.DB_POOL_MAX,
    intakeBatching: { maxBatch: e.INTAKE_BATCH_MAX, maxInFlight: e.INTAKE_STATEMENTS_IN_FLIGHT },
    tenantRateLimitPerSecond: e.TENANT_RATE_LIMIT_PER_SECOND,
    queuePrefix: e.QUEUE_PREFIX,
    queueShards,
    portal: { frameAncestors: e.PORTAL_FRAME_ANCESTORS, brandName: e.PORTAL_BRAND_NAME, accentColor: e.PORTAL_ACCENT_COLOR.toLowerCase() },
  };
}
