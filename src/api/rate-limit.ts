import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../domain/errors.js';
import { RecentMap } from '../domain/recent.js';
import type { RedisClient } from '../infra/redis.js';
import type { Middleware } from './route.js';

/** A share of a tenant's budget for the current window, taken from Redis at once and spent here. */
interface Lease {
  left: number;
  until: number;
}

/**
 * Per-tenant request budget for the management API, shared by every API process through Redis.
 * When Redis is down the in-process insurance limiter takes over, so an outage neither blocks the
 * API nor removes the limit. Provider intake is not limited here: refusing a provider's callback
 * would push the retry burden onto a provider that may not retry at all.
 *
 * On a Redis Cluster the keys need no hash tag: each tenant's budget is one key, touched by one
 * single-key script, so no command spans slots, and untagged the tenants spread over all masters
 * (a shared tag would put every tenant's budget on one node).
 */
export function tenantRateLimit(redis: RedisClient, requestsPerSecond: number, keyPrefix: string): Middleware {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${keyPrefix}:rl:tenant`,
    points: requestsPerSecond,
    duration: 1,
    insuranceLimiter: new RateLimiterMemory({ points: requestsPerSecond, duration: 1 }),
  });
  const spend = leasedBudget((tenantId, points) => limiter.consume(tenantId, points), requestsPerSecond);

  return (_req, res, next) => {
    const tenantId = (res.locals.scope as { tenantId: string } | undefined)?.tenantId;
    if (!tenantId) return next();
    spend(tenantId).then(
      () => next(),
      (rejection: unknown) => {
        if (rejection instanceof RateLimiterRes) {
          const seconds = Math.max(1, Math.ceil(rejection.msBeforeNext / 1000));
          return next(new AppError(429, 'rate_limited', 'too many requests for this tenant; slow down', { 'retry-after': String(seconds) }));
        }
        next(); // a limiter failure must not take the API down with it
      },
    );
  };
}

/**
 * Spends a per-second budget in leases of 1/20 of it (at least 1 request): a process takes a lease
 * from the shared limiter (`consume`, which rejects once the window's budget is spent) and spends
 * it locally until it runs out or its window ends, so a tenant publishing hundreds of events a
 * second costs a round trip per lease, not per request. The price is precision at the edge of a
 * window: the last requests may be refused up to one lease per process early, and the requests
 * that waited for a lease granted in a window's last moments still spend it after that window.
 * A lease is only ever used by requests that found none, or waited for it: a lease that outlived
 * its window is not renewed in a loop (which, for a lease granted at the very end of its window,
 * took lease after lease from that window until the budget was gone and refused a tenant far below
 * it).
 */
export function leasedBudget(
  consume: (tenantId: string, points: number) => Promise<{ msBeforeNext: number }>,
  requestsPerSecond: number,
): (tenantId: string) => Promise<void> {
  const leaseSize = Math.max(1, Math.floor(requestsPerSecond / 20));
  // Tenants come and go: the leases of those that used the API most recently are kept.
  const leases = new RecentMap<Lease>(10_000);
  /** A lease being taken: requests arriving meanwhile wait for it instead of taking one each. */
  const taking = new Map<string, Promise<Lease>>();

  const take = (tenantId: string): Promise<Lease> => {
    let pending = taking.get(tenantId);
    if (!pending) {
      pending = consume(tenantId, leaseSize).then((granted) => {
        const lease = { left: leaseSize, until: Date.now() + granted.msBeforeNext };
        leases.set(tenantId, lease);
        return lease;
      });
      taking.set(tenantId, pending);
      void pending.finally(() => taking.delete(tenantId)).catch(() => undefined);
    }
    return pending;
  };

  return async (tenantId) => {
    const current = leases.get(tenantId);
    if (current && current.left > 0 && current.until > Date.now()) {
      current.left--;
      return;
    }
    for (;;) {
      // Throws the limiter's rejection once the window's budget is spent.
      const granted = await take(tenantId);
      if (granted.left > 0) {
        granted.left--;
        return;
      }
      // More requests waited for that lease than it holds: the rest wait for the next one.
    }
  };
}
