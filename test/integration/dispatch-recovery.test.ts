// Redis losing everything mid-run loses no delivery: PostgreSQL is the record, and the sweeper
// re-admits queued work whose lease ran out. The shared Redis serves every test file at once, so
// it is never flushed: one scenario deletes every key under this platform's prefix (everything
// this platform keeps in Redis: the same loss, from its point of view), the other runs a real
// FLUSHALL on a private redis-server that only this platform uses.
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { workerLockOptions } from '../../src/outbound/dispatcher.js';
import { jobQueueName } from '../../src/outbound/job-queue.js';
import { createRedis } from '../../src/infra/redis.js';
import { createEndpoint, publishMany, slowResponder, statusCounts } from '../helpers/dispatch.js';
import { clearRedisPrefix, eventually, redisUrl, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { attemptsListed } from '../helpers/database.js';

const EVENTS = 200;
// A worker that takes 4 attempts at a time while admission allows 4 endpoints × 10: most admitted
// work waits in Redis, unclaimed, which is exactly what a FLUSHALL loses.
// Sharing through Redis even with one worker: the loss only matters to work that waits there.
const lossEnv = { QUEUED_LEASE_SECONDS: '3', WORKER_CONCURRENCY: '4', SHARE_VIA_REDIS: 'always' };

/** Publishes 50 events to 4 endpoints, lets Redis lose everything mid-run, checks the outcome. */
async function deliveredDespiteLoss(t: TestPlatform, receiver: Receiver, loseEverything: () => Promise<void>, what: string) {
  const tenant = await t.createTenant();
  const endpoints = await Promise.all(Array.from({ length: 4 }, () => createEndpoint(tenant, { url: `${receiver.url}/hook`, maxConcurrency: 10 })));
  const eventIds = await publishMany(tenant, EVENTS / endpoints.length);

  await eventually(async () => receiver.requests.length >= 40, 'delivery under way', 10_000, 10);
  const before = await statusCounts(t);
  expect(before.queued ?? 0).toBeGreaterThan(10); // admitted, waiting in Redis, not yet claimed
  await loseEverything();
  const lostAt = Date.now();

  await eventually(async () => (await statusCounts(t)).succeeded === EVENTS, 'every delivery succeeded', 40_000, 100).catch(async (err: Error) => {
    throw new Error(`${err.message}: ${JSON.stringify(await statusCounts(t))}, ${receiver.requests.length} requests`);
  });
  const recoveredMs = Date.now() - lostAt;

  // Nothing lost: every (event, endpoint) pair reached the receiver.
  const seen = new Set(receiver.requests.map((r) => `${r.headers['webhook-id']} ${r.headers['webhook-delivery-id']}`));
  expect(seen.size).toBe(EVENTS);
  for (const id of eventIds) expect(receiver.requests.filter((r) => r.headers['webhook-id'] === id).length).toBeGreaterThanOrEqual(endpoints.length);
  // Nothing doubled behind our back: every request the receiver saw is a recorded attempt.
  const attempts = Number((await attemptsListed(t.platform.db).count<{ n: string }[]>('* as n'))[0]!.n);
  const duplicates = receiver.requests.length - seen.size;
  console.info(`recovery (${what}): ${EVENTS} deliveries, all succeeded ${recoveredMs} ms after the loss; ${duplicates} duplicate requests`);
  expect(receiver.requests.length).toBe(attempts);
  expect(duplicates).toBe(0);
  // Within seconds: the queued lease (3 s) plus the time to send what was left.
  expect(recoveredMs).toBeLessThan(15_000);
}

describe('recovery from Redis data loss (shared Redis)', { timeout: 60_000 }, () => {
  let t: TestPlatform;
  let receiver: Receiver;
  beforeAll(async () => {
    t = await startTestPlatform({ env: lossEnv });
    receiver = await startReceiver(slowResponder(50));
  });
  afterAll(async () => {
    await receiver.close();
    await t.stop();
  });

  it('every delivery still arrives after all of the platform’s Redis keys are deleted mid-run', async () => {
    await deliveredDespiteLoss(
      t,
      receiver,
      async () => {
        expect(await t.platform.redis.keys(`${t.queuePrefix}:*`)).not.toHaveLength(0);
        await clearRedisPrefix(t.queuePrefix);
      },
      'prefix deleted',
    );
  });

  it('a job taken by a worker that dies before claiming its delivery is delivered within seconds', async () => {
    const tenant = await t.createTenant();
    const ep = await createEndpoint(tenant, { url: `${receiver.url}/hook`, maxConcurrency: 20 });
    // A stand-in for another worker process (same queue, same lock settings) that takes jobs and
    // dies before claiming them: its jobs stay `active` in Redis, and re-admitting those attempts
    // finds the same job ids there.
    let taken = 0;
    const rogue = new Worker(jobQueueName, () => (taken++, new Promise<never>(() => {})), {
      connection: createRedis(redisUrl, 'worker'),
      prefix: t.queuePrefix,
      concurrency: 100,
      ...workerLockOptions(t.config.queuedLeaseSeconds),
    });
    rogue.on('error', () => {});
    await publishMany(tenant, 40);
    await eventually(async () => taken >= 5, 'jobs taken by the doomed worker', 10_000, 10);
    await rogue.close(true); // no more lock renewals: as dead as a SIGKILL for Redis
    const diedAt = Date.now();
    const held = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', ep.id), status: 'queued' }).count<{ n: string }[]>('* as n');
    expect(Number(held[0]!.n)).toBeGreaterThan(0);

    await eventually(async () => (await statusCounts(t, ep.id)).succeeded === 40, 'every delivery succeeded', 30_000, 100);
    const recoveredMs = Date.now() - diedAt;
    console.info(`dead worker's jobs: ${taken} taken, all delivered ${recoveredMs} ms after it died`);
    // Lock (5 s) plus two stall checks (2.5 s each); BullMQ's defaults took up to a minute.
    expect(recoveredMs).toBeLessThan(15_000);
  });
});

describe('recovery from FLUSHALL (private Redis)', { timeout: 60_000 }, () => {
  let redis: RedisServer;
  let t: TestPlatform;
  let receiver: Receiver;
  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestPlatform({ env: { ...lossEnv, REDIS_URL: redis.url } });
    receiver = await startReceiver(slowResponder(50));
  });
  afterAll(async () => {
    await receiver.close();
    await t.stop();
    await redis.kill();
  });

  it('every delivery still arrives after FLUSHALL mid-run', async () => {
    await deliveredDespiteLoss(
      t,
      receiver,
      async () => {
        const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
        try {
          expect(await client.dbsize()).toBeGreaterThan(0);
          expect(await client.flushall()).toBe('OK');
        } finally {
          client.disconnect();
        }
      },
      'FLUSHALL',
    );
  });
});
