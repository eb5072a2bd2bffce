import { Redis, type RedisOptions } from 'ioredis';

/**
 * BullMQ workers need `maxRetriesPerRequest: null` (they block and must ride out reconnects);
 * everything on a request path instead fails fast so a Redis outage never stalls intake: no
 * offline queue while disconnected, and a command timeout for a Redis that still holds the
 * connection but no longer answers (a network partition), which would otherwise hang every
 * tenant API request in the rate limiter for as long as the partition lasts.
 */
export function createRedis(url: string, role: 'worker' | 'request', extra: RedisOptions = {}): Redis {
  return new Redis(url, {
    lazyConnect: false,
    connectTimeout: 3_000,
    ...(role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: 1_000 }),
    retryStrategy: (times) => Math.min(times * 200, 2_000),
    ...extra,
  });
}
