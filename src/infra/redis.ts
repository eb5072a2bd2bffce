import { Cluster, Redis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { keepAliveIdleMs } from './keepalive.js';

/** One Redis server or a Redis Cluster: the platform's code works with either. */
export type RedisClient = Redis | Cluster;

export interface ClusterNode {
  host: string;
  port: number;
}

/** Where Redis is: REDIS_URL, or the seed nodes of REDIS_CLUSTER_NODES when they are set. */
export interface RedisTarget {
  redisUrl: string;
  redisClusterNodes?: ClusterNode[];
}

export type RedisRole = 'worker' | 'request';

/**
 * BullMQ workers need `maxRetriesPerRequest: null` (they block and must ride out reconnects);
 * everything on a request path instead fails fast so a Redis outage never stalls intake: no
 * offline queue while disconnected, and a command timeout for a Redis that still holds the
 * connection but no longer answers (a network partition), which would otherwise hang every
 * tenant API request in the rate limiter for as long as the partition lasts.
 */
const roleOptions = (role: RedisRole): RedisOptions =>
  role === 'worker' ? { maxRetriesPerRequest: null, enableReadyCheck: true } : { maxRetriesPerRequest: 1, commandTimeout: 1_000 };

const reconnectDelay = (times: number) => Math.min(times * 200, 2_000);

export function createRedis(url: string, role: RedisRole, extra: RedisOptions = {}): Redis {
  return new Redis(url, {
    lazyConnect: false,
    connectTimeout: 3_000,
    keepAlive: keepAliveIdleMs,
    ...roleOptions(role),
    ...(role === 'request' ? { enableOfflineQueue: false } : {}),
    retryStrategy: reconnectDelay,
    ...extra,
  });
}

/**
 * Options of a cluster client: the same per-role rules, applied where ioredis reads them. A
 * cluster keeps its offline queue at the cluster level (commands waiting for a node or a slot map)
 * and everything else per node connection, in `redisOptions`; BullMQ checks
 * `redisOptions.maxRetriesPerRequest` of the connections it blocks on, and of their duplicates.
 * Credentials and TLS come from REDIS_URL (`rediss://user:password@…`), whose host is not used.
 */
export function clusterOptions(redisUrl: string, role: RedisRole): ClusterOptions {
  const url = new URL(redisUrl);
  const credentials: RedisOptions = {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  };
  return {
    enableOfflineQueue: role === 'worker',
    clusterRetryStrategy: reconnectDelay,
    redisOptions: { connectTimeout: 3_000, keepAlive: keepAliveIdleMs, ...roleOptions(role), ...credentials },
  };
}

/** A client for the platform's Redis, single server or cluster, configured for its role. */
export function connectRedis(target: RedisTarget, role: RedisRole): RedisClient {
  return target.redisClusterNodes
    ? new Cluster(target.redisClusterNodes, clusterOptions(target.redisUrl, role))
    : createRedis(target.redisUrl, role);
}

/**
 * Whether Redis can serve the platform now. On a cluster a node answering is not enough: while a
 * master is down and not yet replaced, its slots (some shards, some tenants' rate limits) refuse
 * every command, and the cluster says so in CLUSTER INFO.
 */
export async function redisServing(redis: RedisClient): Promise<boolean> {
  if (redis instanceof Cluster) return /^cluster_state:ok\r?$/m.test(await redis.cluster('INFO'));
  return (await redis.ping()) === 'PONG';
}
