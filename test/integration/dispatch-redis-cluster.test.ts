// Dispatch on a real Redis Cluster (three masters with a replica each, started for this file):
// the platform runs with REDIS_CLUSTER_NODES and the cluster's default of 16 queue shards, and
// with SHARE_VIA_REDIS=always so that admitted work really goes through the sharded queues. What
// counts is what the receiver got, what PostgreSQL recorded, and where the cluster put the keys.
import { Cluster } from 'ioredis';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobQueueName, hashTagSlot, shardPrefixes } from '../../src/outbound/job-queue.js';
import { createEndpoint, metricValue, publish, publishMany, settledDelivery, slowResponder, startWorkerProcess, statusCounts, type WorkerProcess } from '../helpers/dispatch.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';

const SHARDS = 16; // the default with REDIS_CLUSTER_NODES

// About 35 s on a busy 2-core machine: the cluster forms in ~3 s, the rest is publishing and
// delivering a few hundred events.
describe('dispatch on a Redis Cluster', { timeout: 60_000 }, () => {
  let cluster: RedisCluster;
  /** The test's own view of the cluster, to look at keys and channels. */
  let inspector: Cluster;
  const receivers: Receiver[] = [];
  const receiver = async (responder?: Parameters<typeof startReceiver>[0]) => {
    const r = await startReceiver(responder);
    receivers.push(r);
    return r;
  };

  beforeAll(async () => {
    cluster = await startRedisCluster();
    inspector = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    inspector?.disconnect();
    await cluster?.stop();
  });

  /** Jobs each shard's queue took so far, from BullMQ's per-queue event stream. */
  const jobsAdded = (prefixes: string[]) =>
    Promise.all(
      prefixes.map(async (prefix) => {
        const entries = await inspector.xrange(`${prefix}:${jobQueueName}:events`, '-', '+');
        return entries.filter(([, fields]) => fields[0] === 'event' && fields[1] === 'added').length;
      }),
    );

  describe('one process (role all)', () => {
    let t: TestPlatform;
    beforeAll(async () => {
      t = await startTestPlatform({ role: 'all', env: { REDIS_CLUSTER_NODES: cluster.seeds, SHARE_VIA_REDIS: 'always' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('is ready, and delivers a live event, signed, to a receiver on loopback', async () => {
      // Ready once the cluster client has the slot map and CLUSTER INFO says ok.
      const ready = await eventually(async () => {
        const res = await t.call('GET', '/readyz');
        return res.status === 200 && res;
      }, 'readyz 200 on the cluster');
      expect(ready.body).toEqual({ status: 'ready', database: true, redis: true });
      const r = await receiver();
      const tenant = await t.createTenant();
      const endpoint = await createEndpoint(tenant, { url: `${r.url}/hook` });
      const eventId = await publish(tenant);
      const d = await settledDelivery(tenant, eventId);
      expect(d).toMatchObject({ status: 'succeeded', endpointId: endpoint.id, attemptCount: 1 });
      expect(r.requests).toHaveLength(1);
      expect(r.requests[0]!.headers).toMatchObject({ 'webhook-id': eventId, 'webhook-signature': expect.stringMatching(/^v1,/) });
    });

    it('retries a failed attempt with the same webhook-id until it succeeds', async () => {
      const r = await receiver((_req, res, i) => void res.writeHead(i < 2 ? 503 : 200).end());
      const tenant = await t.createTenant();
      await createEndpoint(tenant, { url: `${r.url}/hook` });
      const eventId = await publish(tenant);
      const d = await settledDelivery(tenant, eventId);
      expect(d.status).toBe('succeeded');
      expect(d.attempts!.map((a) => [a.statusCode, a.outcome])).toEqual([
        [503, 'retry'],
        [503, 'retry'],
        [200, 'success'],
      ]);
      expect(r.requests.map((q) => q.headers['webhook-id'])).toEqual([eventId, eventId, eventId]);
    });

    it('a backlog goes through the shards, whose keys live on more than one master, each in the slot of its hash tag', async () => {
      const queues = t.platform.dispatcher!.jobQueues;
      const prefixes = queues.map((q) => q.opts.prefix!);
      expect(prefixes).toEqual(shardPrefixes(t.queuePrefix, SHARDS, true));
      const before = await jobsAdded(prefixes);

      // A rate-limited endpoint gets no hand-offs (each delivery is admitted on its own), and with
      // a concurrency of 2 admission keeps one slot here and queues the rest to Redis: most
      // deliveries become jobs, instead of riding one slot's chain of hand-offs.
      const r = await receiver(slowResponder(5));
      const tenant = await t.createTenant();
      const endpoints = [
        await createEndpoint(tenant, { url: `${r.url}/a`, maxConcurrency: 2, rateLimitPerSecond: 200 }),
        await createEndpoint(tenant, { url: `${r.url}/b`, maxConcurrency: 2, rateLimitPerSecond: 200 }),
      ];
      const eventIds = await publishMany(tenant, 100);
      for (const endpoint of endpoints) {
        await eventually(async () => (await statusCounts(t, endpoint.id)).succeeded === 100, 'the backlog delivered', 30_000, 100);
      }
      expect(new Set(r.requests.map((q) => q.headers['webhook-id']))).toEqual(new Set(eventIds));

      const added = (await jobsAdded(prefixes)).map((n, i) => n - before[i]!);
      const used = prefixes.filter((_, i) => added[i]! > 0);
      console.info(`cluster shards: jobs per shard ${added.join(',')}`);
      // A third of the shards' slices lie in each master's slot range, so jobs in more than 11 of
      // the 16 shards reach all three masters.
      expect(used.length).toBeGreaterThanOrEqual(12);
      // Every shard's keys share the slot of its tag (so BullMQ's scripts never span slots), and
      // that slot belongs to the master that holds them.
      const masters = new Set<number>();
      for (const prefix of used) {
        const key = `${prefix}:${jobQueueName}:events`;
        const slot = Number(await cluster.cli(cluster.ports[0]!, 'cluster', 'keyslot', key));
        expect(slot, prefix).toBe(hashTagSlot(prefix.slice(1, -1)));
        expect(Number(await cluster.cli(cluster.ports[0]!, 'cluster', 'keyslot', `${prefix}:${jobQueueName}:wait`))).toBe(slot);
        const master = await cluster.masterOf(slot);
        expect(Number(await cluster.cli(master, 'exists', key)), `${key} on ${master}`).toBe(1);
        masters.add(master);
      }
      expect(masters.size).toBe(3);
    });

    it('keeps the tenant request budget in the cluster', async () => {
      const api = await startTestPlatform({ role: 'api', database: t.database, env: { ...t.env, TENANT_RATE_LIMIT_PER_SECOND: '20' } });
      try {
        // Until its client is ready the limiter runs in memory (Redis down is not a reason to refuse).
        await eventually(async () => (await api.call('GET', '/readyz')).status === 200, 'api ready on the cluster');
        const tenant = await api.createTenant();
        // Bursts of 40 until one overruns a second's budget of 20 (a slow machine may need two).
        let refused = 0;
        for (let burst = 0; burst < 10 && refused === 0; burst++) {
          const answers = await Promise.all(Array.from({ length: 40 }, () => tenant.call('GET', '/v1/endpoints')));
          refused = answers.filter((a) => a.status === 429).length;
        }
        expect(refused).toBeGreaterThan(0);
        // One key per tenant, as on a single Redis (QUEUE_PREFIX, not the test's queue prefix).
        expect(await inspector.exists(`${api.config.queuePrefix}:rl:tenant:${tenant.id}`)).toBe(1);
      } finally {
        await api.stop();
      }
    });
  });

  describe('an api process and two worker processes', () => {
    let t: TestPlatform;
    const workers: WorkerProcess[] = [];
    beforeAll(async () => {
      t = await startTestPlatform({ role: 'api', env: { REDIS_CLUSTER_NODES: cluster.seeds, SHARE_VIA_REDIS: 'always' } });
    });
    afterAll(async () => {
      for (const w of workers) {
        w.kill('SIGKILL');
        await w.exited;
      }
      await t?.stop();
    });

    it('share the work through the cluster: all delivered once each, both workers took part, each sees the other', async () => {
      workers.push(startWorkerProcess(t), startWorkerProcess(t));
      const ports = await Promise.all(workers.map((w) => w.port()));

      // Both processes serve every shard, so the first shard's queue counts them both: neither
      // believes it is alone.
      const firstShard = new Queue(jobQueueName, { connection: inspector, prefix: shardPrefixes(t.queuePrefix, SHARDS, true)[0] });
      try {
        await eventually(async () => (await firstShard.getWorkersCount()) === 2, 'two workers on the first shard', 10_000, 100);
      } finally {
        await firstShard.close();
      }
      // The API wakes the workers over pub/sub; each worker subscribes on one node of its choice,
      // and a PUBLISH on any node reaches them all.
      const wakeChannel = `${t.queuePrefix}:wake`;
      const subscribers = async () => {
        let n = 0;
        for (const port of cluster.ports) n += Number((await cluster.cli(port, 'pubsub', 'numsub', wakeChannel)).trim().split('\n')[1]);
        return n;
      };
      await eventually(async () => (await subscribers()) === 2, 'both workers subscribed to the wake-up channel', 10_000, 100);
      const listener = inspector.duplicate();
      const wakeUps: string[] = [];
      listener.on('message', (channel: string) => wakeUps.push(channel));
      await listener.subscribe(wakeChannel);

      // As in the backlog above, rate-limited endpoints make every delivery a job of its own. (An
      // unlimited endpoint's work would ride a few long chains of hand-offs, and on a busy machine
      // one process may start every chain.)
      const r = await receiver(slowResponder(10));
      const tenant = await t.createTenant();
      const endpoints = [
        await createEndpoint(tenant, { url: `${r.url}/a`, maxConcurrency: 2, rateLimitPerSecond: 200 }),
        await createEndpoint(tenant, { url: `${r.url}/b`, maxConcurrency: 2, rateLimitPerSecond: 200 }),
      ];
      const eventIds = await publishMany(tenant, 100);
      for (const endpoint of endpoints) {
        await eventually(async () => (await statusCounts(t, endpoint.id)).succeeded === 100, 'all 100 delivered', 40_000, 100);
      }
      expect(wakeUps.length).toBeGreaterThan(0);
      listener.disconnect();

      expect(new Set(r.requests.map((q) => q.headers['webhook-id']))).toEqual(new Set(eventIds));
      const metrics = await Promise.all(ports.map((port) => metricsOf(`http://127.0.0.1:${port}`)));
      for (const [i, text] of metrics.entries()) expect(metricValue(text, 'webhook_delivery_attempts_total'), `worker ${i}`).toBeGreaterThan(0);
      // The api's own /metrics is left out: it shares this test process's registry with the
      // platform of the other describe block, and it makes no attempts.
      await expectNoViolations({ db: t.platform.db, receivers: [r], metricsText: metrics, tenantIds: [tenant.id] });
    });
  });
});
