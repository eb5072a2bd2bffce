import { z } from 'zod';
import { defaultRetention } from '../domain/retention.js';
import { defaultRetryPolicy } from '../domain/retry-policy.js';

/** Parses a boolean the way operators write it, and refuses anything else instead of guessing. */
const bool = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
/**
 * A whole number within [min, max]. A number out of range, negative ones included, is told the bound
 * it missed ("must be ≥ 1"); only text that is not a whole number at all hears "must be a whole number".
 */
const int = (min: number, max = Number.MAX_SAFE_INTEGER) =>
  z
    .string()
    .regex(/^-?\d+$/, 'must be a whole number')
    .transform(Number)
    .pipe(z.number().int().min(min, `must be ≥ ${min}`).max(max, `must be ≤ ${max}`));

export const maxQueueShards = 256;

/**
 * `host:port,host:port,...`: any few nodes of the cluster (ioredis learns the rest from them). A
 * host is a name, an IPv4 address or a bracketed IPv6 address; every entry needs its port.
 */
const clusterNodes = z.string().transform((value, ctx) => {
  const nodes: { host: string; port: number }[] = [];
  for (const entry of value.split(',').map((e) => e.trim())) {
    const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/.exec(entry);
    const port = m ? Number(m[2]) : 0;
    if (!m || port < 1 || port > 65535) {
      ctx.addIssue({ code: 'custom', message: `must be a comma-separated list of host:port, got "${entry}"` });
      return z.NEVER;
    }
    nodes.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port });
  }
  return nodes;
});

/**
 * `http://[user:pass@]host:port` of the forward proxy every delivery leaves through. Only http: the
 * hop to the proxy is inside our network, and CONNECT carries https end to end. The port is
 * required so no one has to guess which default a proxy URL implies. Messages never echo the
 * value: it may hold the proxy's password.
 */
const proxyUrl = z.string().transform((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: 'custom', message: 'must be a URL like http://[user:pass@]host:port' });
    return z.NEVER;
  }
  const problem =
    url.protocol !== 'http:' ? 'scheme must be http'
    : url.hostname === '' ? 'must name a host'
    : url.port === '' || !/:\d{1,5}$/.test(url.host) ? 'must give a port (http://host:port)'
    : (url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '' ? 'must not have a path, query or fragment'
    : url.password !== '' && url.username === '' ? 'a password needs a user name'
    : undefined;
  if (problem !== undefined) {
    ctx.addIssue({ code: 'custom', message: `${problem} (http://[user:pass@]host:port)` });
    return z.NEVER;
  }
  return url.href.replace(/\/$/, '');
});

/**
 * NO_PROXY conventions: comma-separated host names, `.example.com` or `*.example.com` for a domain's
 * subdomains (a bare `example.com` covers its subdomains too), IP literals, optional `:port`, and
 * `*` for everything. Lower-cased, without empty entries.
 */
const noProxyList = z.string().transform((value, ctx) => {
  const entries = value.split(',').map((e) => e.trim().toLowerCase()).filter((e) => e !== '');
  for (const entry of entries) {
    if (!/^(\*|(\*?\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?|\[[0-9a-f:.]+\]|[0-9a-f:.]+)(:\d{1,5})?$/.test(entry)) {
      ctx.addIssue({ code: 'custom', message: `must be a comma-separated list of hosts, .domains or IP addresses, got "${entry}"` });
      return z.NEVER;
    }
  }
  return entries;
});

/**
 * Every environment variable the platform reads, with its default. This is the only description of
 * configuration: the README table is checked against it by a test.
 */
export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  PORT: int(0, 65535).default(3000),
  DATABASE_URL: z.url({ protocol: /^postgres(ql)?$/ }).default('postgres://postgres@127.0.0.1:5432/webhooks'),
  // A streaming replica of DATABASE_URL for reads that tolerate lag (src/infra/read-replica.ts).
  DATABASE_READ_URL: z.url({ protocol: /^postgres(ql)?$/ }).optional(),
  // Past this replay lag, reads meant for the replica go to the primary.
  READ_REPLICA_MAX_LAG_SECONDS: int(1, 3600).default(5),
  REDIS_URL: z.url({ protocol: /^rediss?$/ }).default('redis://127.0.0.1:6379'),
  // Seed nodes of a Redis Cluster; when set, the platform runs on the cluster instead of REDIS_URL.
  REDIS_CLUSTER_NODES: clusterNodes.optional(),
  ADMIN_TOKEN: z.string().min(24, 'must be at least 24 characters').optional(),
  SECRETS_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'must be 32 bytes in base64')
    .optional(),
  // Ingest URLs shown to tenants are built from it, so it must be an http(s) URL.
  PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
  ALLOW_PRIVATE_TARGETS: bool.default(false),
  // Deliveries leave through this forward proxy (src/outbound/http-client.ts; docs/security.md).
  EGRESS_PROXY_URL: proxyUrl.optional(),
  EGRESS_NO_PROXY: noProxyList.optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  MAX_BODY_BYTES: int(1024).default(1_048_576),
  // Slow clients (slow-loris): a request must deliver its headers, and then all of it, within these.
  HTTP_HEADERS_TIMEOUT_MS: int(500, 600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1_000, 3_600_000).default(30_000),
  RETRY_MAX_ATTEMPTS: int(1, 100).default(defaultRetryPolicy.maxAttempts),
  RETRY_BASE_DELAY_MS: int(1).default(defaultRetryPolicy.baseDelayMs),
  RETRY_MAX_DELAY_MS: int(1).default(defaultRetryPolicy.maxDelayMs),
  MAX_EVENT_AGE_SECONDS: int(1).default(defaultRetryPolicy.maxEventAgeSeconds),
  RETRY_AFTER_MAX_SECONDS: int(0).default(defaultRetryPolicy.retryAfterMaxSeconds),
  ATTEMPT_TIMEOUT_MS: int(100).default(15_000),
  CONNECT_TIMEOUT_MS: int(50).default(5_000),
  ENDPOINT_MAX_CONCURRENCY: int(1, 1000).default(10),
  WORKER_CONCURRENCY: int(1, 5000).default(200),
  // auto: a worker hands part of what it admits to Redis only while other workers are connected.
  SHARE_VIA_REDIS: z.enum(['auto', 'always']).default('auto'),
  // Backlogs yield to live work (src/outbound/backlog-pacing.ts); a target of 0 turns it off.
  BACKLOG_PACING_TARGET_MS: int(0, 60_000).default(3),
  BACKLOG_PACING_MIN_PER_SECOND: int(1).default(50),
  CIRCUIT_FAILURE_THRESHOLD: int(1).default(10),
  CIRCUIT_COOLDOWN_SECONDS: int(1).default(30),
  AUTO_DISABLE_AFTER_SECONDS: int(1).default(432_000),
  SWEEP_INTERVAL_MS: int(50).default(1_000),
  QUEUED_LEASE_SECONDS: int(1).default(10),
  RECONCILE_INTERVAL_SECONDS: int(1).default(60),
  REPLAY_MAX_LIMIT: int(1).default(10_000),
  REPLAY_RATE_PER_SECOND: int(1).default(50),
  // Finished data older than this is removed (src/ops/retention.ts); see docs/runbook.md.
  RETENTION_DAYS: int(1, 3650).default(defaultRetention.retentionDays),
  DEAD_LETTER_RETENTION_DAYS: int(1, 3650).default(defaultRetention.deadLetterRetentionDays),
  AUDIT_RETENTION_DAYS: int(1, 36500).default(defaultRetention.auditRetentionDays),
  DB_POOL_MAX: int(1, 500).default(20),
  // Connections opened and warmed before the process reports ready, and kept while idle
  // (src/infra/db.ts, warmPool). At most DB_POOL_MAX; unset, DB_POOL_MAX: a pool of fixed size.
  DB_POOL_MIN: int(0, 500).optional(),
  // Group commit at intake (src/infra/batcher.ts): callbacks per statement, and statements in
  // flight at once, while more wait to go together. 1 and DB_POOL_MAX: one statement per callback.
  INTAKE_BATCH_MAX: int(1, 1000).default(64),
  INTAKE_STATEMENTS_IN_FLIGHT: int(1, 500).default(2),
  TENANT_RATE_LIMIT_PER_SECOND: int(1).default(1_000),
  // Prefix of every Redis key (queues, wake-up channel): lets several deployments or test runs
  // share one Redis without sharing work. All processes of one deployment must use the same one.
  QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1-64 letters, digits, - or _').default('whr'),
  // Job queues (BullMQ), each in its own hash slot. Unset: 1 on a single Redis, 16 on a cluster (see
  // loadConfig). Every worker process of one deployment must use the same number.
  QUEUE_SHARDS: int(1, maxQueueShards).optional(),
  // Who may frame /portal/ (CSP frame-ancestors): space-separated origins such as https://app.example.com.
  PORTAL_FRAME_ANCESTORS: z
    .string()
    .trim()
    .refine(
      (v) => v === "'none'" || v === "'self'" || v.split(/\s+/).every((o) => /^(https?:\/\/[A-Za-z0-9*.-]+(:\d{1,5})?|'self')$/.test(o)),
      "must be 'none', or space-separated origins like https://app.example.com",
    )
    .default("'none'"),
  PORTAL_BRAND_NAME: z.string().trim().min(1).max(100).default('Webhooks'),
  PORTAL_ACCENT_COLOR: z.string().regex(/^#[0-9A-Fa-f]{6}$/, 'must be a #rrggbb hex colour').default('#2563eb'),
});

export type EnvInput = z.input<typeof envSchema>;
export type ParsedEnv = z.output<typeof envSchema>;
