// Redis is unreachable while providers keep calling: intake must keep accepting into PostgreSQL
// (or answer 503 with Retry-After, never 500), and what it accepted is delivered while Redis is
// still down: admission then puts everything in flight in the worker itself, with no queue. The API runs in this process (role `api`) and the dispatcher in a worker process, both
// on a private redis-server that is killed and later replaced by a new, empty one on the same port:
// the API loses its wake-up channel and rate-limit store, the worker its queue.
// (redis-blackhole.test.ts: the same with a Redis that holds connections but never answers.)
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, countRows, expectAcknowledgedStored, mapConcurrent, measured, sendUntilAccepted, signed } from '../helpers/chaos.js';
import { createEndpoint, startWorkerProcess, type WorkerProcess } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const BEFORE = 20;
const DURING = 100;
const PUBLISHED = 10;

describe('Redis unreachable during intake', () => {
  let redis: RedisServer;
  let t: TestPlatform;
  let worker: WorkerProcess;
  let receiver: Receiver;

  beforeAll(async () => {
    redis = await startRedisServer();
    t = await startTestPlatform({ role: 'api', env: { REDIS_URL: redis.url } });
    worker = startWorkerProcess(t);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    worker?.kill('SIGKILL');
    await worker?.exited;
    await receiver?.close();
    await t?.stop();
    await redis?.kill();
  });

  it('callbacks are accepted into PostgreSQL (or 503, never 500) and all arrive after Redis returns', { timeout: 120_000 }, async () => {
    const workerUrl = `http://127.0.0.1:${await worker.port()}`;
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    await createEndpoint(tenant, { url: `${receiver.url}/hook` });
    const body = (i: number) => automation.body(randomUUID(), 'order.created', 'sub_1', { i });
    await mapConcurrent(Array.from({ length: BEFORE }, (_, i) => body(i)), 10, (b) => sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, b)));
    await eventually(() => allSettled(t.platform.db, BEFORE), 'first callbacks delivered', 30_000, 100);

    await redis.kill();
    const killedAt = Date.now();
    await eventually(async () => (await t.call('GET', '/readyz')).body?.redis === false, 'readiness reports Redis down', 10_000, 100);

    // Intake while Redis is gone: every answer is a 200 (stored in PostgreSQL) or a 503.
    const during = Array.from({ length: DURING }, (_, i) => body(BEFORE + i));
    const answers = await mapConcurrent(during, 10, async (b) => {
      const cb = signed.automation(source.secret, b)();
      const res = await request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: cb.rawBody, headers: cb.headers });
      expect([200, 503], res.text).toContain(res.status);
      if (res.status === 503) expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      return res;
    });
    // Tenant publishing goes through the same store; its rate limiter falls back to memory.
    const published = await mapConcurrent(Array.from({ length: PUBLISHED }, (_, i) => i), 5, (i) =>
      tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { published: i } }, headers: { 'idempotency-key': `redis-outage-${i}` } }),
    );
    for (const res of published) expect(res.status, res.text).toBe(202);
    const acceptedDuring = answers.filter((r) => r.status === 200).length;
    // Accepted means stored: the rows are in PostgreSQL now, with Redis still down.
    await expectAcknowledgedStored(t.platform.db, answers.filter((r) => r.status === 200).map((r) => r.body));
    expect(await countRows(t.platform.db, 'events')).toBe(BEFORE + acceptedDuring + PUBLISHED);
    // Nobody announces the new work (the wake-up channel is Redis too): the worker's polling finds
    // it, and what Redis refuses to queue runs in the worker instead.
    const acceptedSoFar = BEFORE + acceptedDuring + PUBLISHED;
    await eventually(() => allSettled(t.platform.db, acceptedSoFar), 'accepted work delivered while Redis is down', 30_000, 100);
    const deliveredWhileDownMs = Date.now() - killedAt;
    expect((await t.call('GET', '/readyz')).body?.redis).toBe(false);

    redis = await startRedisServer(redis.port);
    const restartedAt = Date.now();
    // What was refused with 503 the provider sends again.
    const refused = during.filter((_, i) => answers[i]!.status !== 200);
    await mapConcurrent(refused, 10, (b) => sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, b)));
    const total = BEFORE + DURING + PUBLISHED;
    await eventually(() => allSettled(t.platform.db, total), 'everything accepted delivered after Redis returned', 60_000, 100);
    const settledMs = Date.now() - restartedAt;

    const stats = await expectNoViolations({ db: t.platform.db, receivers: [receiver], metricsText: [await metricsOf(t.url), await metricsOf(workerUrl)] });
    expect(stats.succeeded).toBe(total);
    measured('redis-outage', {
      outageMs: restartedAt - killedAt,
      acceptedWhileRedisDown: acceptedDuring + PUBLISHED,
      refused503WhileRedisDown: refused.length,
      msFromRedisDownToAcceptedDelivered: deliveredWhileDownMs,
      msFromRedisBackToAllSettled: settledMs,
      redeliveries: stats.redeliveries,
    });
  });
});
