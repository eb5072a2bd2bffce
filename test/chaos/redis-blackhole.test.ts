// Redis becomes a black hole (a network partition: connections stay open, nothing answers) while
// providers and tenants keep calling. Intake must answer promptly from PostgreSQL, never hang and
// never 500, and everything accepted is delivered while the partition lasts (what Redis cannot
// take runs in the process that admitted it). A TCP proxy in front of
// the shared Redis cuts this platform only (its keys have a private prefix); api and worker run in
// one process (role `all`).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, mapConcurrent, measured, signed } from '../helpers/chaos.js';
import { createEndpoint } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, redisUrl, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

describe('Redis a black hole during intake', () => {
  let proxy: TcpProxy;
  let t: TestPlatform;
  let receiver: Receiver;

  beforeAll(async () => {
    const shared = new URL(redisUrl);
    proxy = await startTcpProxy({ host: shared.hostname, port: Number(shared.port || 6379) });
    t = await startTestPlatform({ env: { REDIS_URL: `redis://127.0.0.1:${proxy.port}` } });
    receiver = await startReceiver();
  });
  afterAll(async () => {
    proxy?.restore();
    await receiver?.close();
    await t?.stop();
    await proxy?.close();
  });

  it('callbacks and tenant publishing answer promptly from PostgreSQL; everything arrives after the partition', { timeout: 90_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    await createEndpoint(tenant, { url: `${receiver.url}/hook` });

    proxy.cut('blackhole');
    const cutAt = Date.now();
    const callbacks = Array.from({ length: 30 }, (_, i) => automation.body(randomUUID(), 'order.created', 'sub_1', { i }));
    const timings: number[] = [];
    // Promptly means bounded by the Redis command timeout (1 s), not by the partition: anything
    // still unanswered after 10 s is hanging on Redis and fails here rather than at the test timeout.
    const timed = async <T>(work: Promise<T>): Promise<T> => {
      const started = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('request hung for 10 s while Redis was partitioned')), 10_000);
      });
      try {
        return await Promise.race([work, hung]);
      } finally {
        clearTimeout(timer);
        timings.push(Date.now() - started);
      }
    };
    const answers = await mapConcurrent(callbacks, 10, (b) => {
      const cb = signed.automation(source.secret, b)();
      return timed(request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: cb.rawBody, headers: cb.headers }));
    });
    for (const res of answers) expect(res.status, res.text).toBe(200);
    // The management API's per-tenant rate limit lives in Redis; it must fall back, not hang.
    const published = await mapConcurrent(Array.from({ length: 5 }, (_, i) => i), 5, (i) =>
      timed(tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { i } }, headers: { 'idempotency-key': `blackhole-${i}` } })),
    );
    for (const res of published) expect(res.status, res.text).toBe(202);
    const listed = await timed(tenant.call('GET', '/v1/events?limit=100'));
    expect(listed.status).toBe(200);
    expect(listed.body.data).toHaveLength(35);
    expect((await t.call('GET', '/readyz')).body).toMatchObject({ status: 'unavailable', redis: false });
    await eventually(() => allSettled(t.platform.db, 35), 'everything delivered during the partition', 60_000, 100);
    const settledMs = Date.now() - cutAt;
    expect((await t.call('GET', '/readyz')).body).toMatchObject({ redis: false });

    proxy.restore();
    const restoredAt = Date.now();
    const stats = await expectNoViolations({ db: t.platform.db, receivers: [receiver], metricsText: [await metricsOf(t.url)] });
    expect(stats.succeeded).toBe(35);
    measured('redis-blackhole', {
      partitionMs: restoredAt - cutAt,
      slowestAnswerMsDuringPartition: Math.max(...timings),
      msFromCutToAllSettled: settledMs,
      redeliveries: stats.redeliveries,
    });
  });
});
