// Redis dies mid-run and comes back empty (no persistence, like a restarted cache node). The
// platform talks to a private redis-server (the shared one serves other test files), which is
// SIGKILLed while admitted jobs wait in it and replaced by a new, empty server on the same port.
// PostgreSQL is the record: everything pending must still arrive, through the queued leases.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, countRows, deliveryStatuses, mapConcurrent, measured, sendUntilAccepted, signed } from '../helpers/chaos.js';
import { createEndpoint, slowResponder } from '../helpers/dispatch.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const CALLBACKS = 200;
const ENDPOINTS = 3;

describe('Redis restarted empty mid-run', () => {
  let redis: RedisServer;
  let t: TestPlatform;
  let receiver: Receiver;

  beforeAll(async () => {
    redis = await startRedisServer();
    // The worker takes 4 attempts at a time while admission allows 3 × 10, and shares through
    // Redis although it is alone: most admitted work waits in Redis, unclaimed, which is exactly
    // what a restart loses.
    t = await startTestPlatform({ env: { REDIS_URL: redis.url, WORKER_CONCURRENCY: '4', QUEUED_LEASE_SECONDS: '3', SHARE_VIA_REDIS: 'always' } });
    receiver = await startReceiver(slowResponder(50));
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
    await redis?.kill();
  });

  it('everything pending still arrives; the lost jobs cause no redelivery', { timeout: 120_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    for (let i = 0; i < ENDPOINTS; i++) await createEndpoint(tenant, { url: `${receiver.url}/hook${i}`, maxConcurrency: 10 });
    const bodies = Array.from({ length: CALLBACKS }, (_, i) => automation.body(randomUUID(), 'order.created', 'sub_1', { i }));
    await mapConcurrent(bodies, 16, (body) => sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, body)));

    await eventually(async () => receiver.requests.length >= 40 && ((await deliveryStatuses(t.platform.db)).queued ?? 0) > 10, 'jobs waiting in Redis', 30_000, 10);
    const atKill = await deliveryStatuses(t.platform.db);
    await redis.kill();
    // A moment without any Redis: admission rounds and job bookkeeping fail and must not lose anything.
    await eventually(async () => (await t.call('GET', '/readyz')).status === 503, 'readiness reports Redis down', 10_000, 100);
    redis = await startRedisServer(redis.port);
    const restartedAt = Date.now();

    await eventually(() => allSettled(t.platform.db, CALLBACKS * ENDPOINTS), 'every delivery settled after the restart', 60_000, 100);
    const recoveredMs = Date.now() - restartedAt;
    expect(await deliveryStatuses(t.platform.db)).toEqual({ succeeded: CALLBACKS * ENDPOINTS });
    await eventually(async () => (await t.call('GET', '/readyz')).status === 200, 'ready again', 10_000);

    const stats = await expectNoViolations({ db: t.platform.db, receivers: [receiver], metricsText: [await metricsOf(t.url)] });
    // Jobs lost with Redis were never claimed, so losing them costs time, not duplicates: the only
    // request a receiver may see twice is one whose attempt timed out (a saturated machine), and
    // the checker has proved each request is a recorded attempt.
    const timedOut = await countRows(t.platform.db, 'attempts', { error_class: 'attempt_timeout' });
    expect(stats.redeliveries).toBeLessThanOrEqual(timedOut);
    measured('redis-restart', {
      deliveries: stats.deliveries,
      queuedAtKill: atKill.queued ?? 0,
      inFlightAtKill: atKill.in_flight ?? 0,
      pendingAtKill: atKill.pending ?? 0,
      redeliveries: stats.redeliveries,
      attemptTimeouts: timedOut,
      msFromRestartToAllSettled: recoveredMs,
    });
  });
});
