import type { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { AppError } from '../domain/errors.js';
import type { Middleware } from './route.js';

/**
 * Per-tenant request budget for the management API, shared by every API process through Redis.
 * When Redis is down the in-process insurance limiter takes over, so an outage neither blocks the
 * API nor removes the limit. Provider intake is not limited here: refusing a provider's callback
 * would push the retry burden onto a provider that may not retry at all.
 */
export function tenantRateLimit(redis: Redis, requestsPerSecond: number, keyPrefix: string): Middleware {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${keyPrefix}:rl:tenant`,
    points: requestsPerSecond,
    duration: 1,
    insuranceLimiter: new RateLimiterMemory({ points: requestsPerSecond, duration: 1 }),
  });
  return (_req, res, next) => {
    const tenantId = (res.locals.scope as { tenantId: string } | undefined)?.tenantId;
    if (!tenantId) return next();
    limiter.consume(tenantId).then(
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
