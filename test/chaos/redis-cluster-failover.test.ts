// A master of the Redis Cluster dies (SIGKILL) while hundreds of deliveries are queued and in
// flight: its replica takes over within seconds, and nothing is lost and nothing is delivered as
// two different events. The API runs in this process (role `api`), two worker processes share the
// work through the cluster's queue shards (SHARE_VIA_REDIS=always), and the killed master is the
// one serving the first shard, where the workers also count each other.
//
// While the cluster is down (no master for a third of the slots, so cluster_state:fail everywhere),
// hand-offs to Redis fail: the workers put those deliveries back to pending and run everything
// themselves for a few seconds; jobs the dead master took but had not yet replicated come back
// through their lease. The API keeps answering 202: its Redis calls fail fast.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { jobQueueName, hashTagSlot, shardPrefixes } from '../../src/outbound/job-queue.js';
import { measured, sleep } from '../helpers/chaos.js';
import { createEndpoint, publishMany, slowResponder, startWorkerProcess, statusCounts, type WorkerProcess } from '../helpers/dispatch.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startRedisCluster, type RedisCluster } from '../helpers/redis-cluster.js';
import { attemptsListed } from '../helpers/database.js';

const SHARDS = 16; // the default with REDIS_CLUSTER_NODES
const BEFORE = 150; // events published around the kill (each to four endpoints)
// After the failover, events go in batches of 10 until the queues take jobs again: a worker whose
// hand-off Redis refused keeps what it admits for 5 s after the last refusal (src/outbound/admission-loop.ts),
// and under load the last refusal can come well after the failover.
const AFTER_WITHIN_MS = 20_000;
const ENDPOINTS = ['a', 'b', 'c', 'd'];

describe('Redis Cluster: a master is killed mid-run', () => {
  let cluster: RedisCluster;
  let inspector: Cluster;
  let t: TestPlatform;
  const workers: WorkerProcess[] = [];
  let receiver: Receiver;

  beforeAll(async () => {
    cluster = await startRedisCluster({ nodeTimeoutMs: 1_000 });
    inspector = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
    inspector.on('error', () => undefined); // it loses a node too
    t = await startTestPlatform({ role: 'api', env: { REDIS_CLUSTER_NODES: cluster.seeds, SHARE_VIA_REDIS: 'always' } });
    workers.push(startWorkerProcess(t), startWorkerProcess(t));
    receiver = await startReceiver(slowResponder(20));
  });
  afterAll(async () => {
    for (const w of workers) {
      w.kill('SIGKILL');
      await w.exited;
    }
    await receiver?.close();
    await t?.stop();
    inspector?.disconnect();
    await cluster?.stop();
  });

  const prefixes = () => shardPrefixes(t.queuePrefix, SHARDS, true);
  /** Jobs the shards' queues took so far, from BullMQ's per-queue event streams. */
  const jobsAdded = async () => {
    let total = 0;
    for (const prefix of prefixes()) {
      const entries = await inspector.xrange(`${prefix}:${jobQueueName}:events`, '-', '+');
      total += entries.filter(([, fields]) => fields[0] === 'event' && fields[1] === 'added').length;
    }
    return total;
  };

  it('after the failover every event reached every endpoint, under one webhook-id each', { timeout: 90_000 }, async () => {
    const workerUrls = (await Promise.all(workers.map((w) => w.port()))).map((port) => `http://127.0.0.1:${port}`);
    await eventually(async () => (await t.call('GET', '/readyz')).status === 200, 'api ready on the cluster');
    const tenant = await t.createTenant();
    // Rate-limited endpoints get no hand-offs, so each delivery is admitted on its own and, beyond
    // the one slot admission keeps locally, queued to Redis; the last endpoint runs chains of
    // hand-offs as unlimited endpoints do.
    for (const name of ENDPOINTS) {
      const limits = name === 'd' ? { maxConcurrency: 10 } : { maxConcurrency: 3, rateLimitPerSecond: 100 };
      await createEndpoint(tenant, { url: `${receiver.url}/${name}`, ...limits });
    }

    const publishing = publishMany(tenant, BEFORE);
    // The kill comes a quarter of the way through, while events are still being published.
    await eventually(async () => receiver.requests.length >= BEFORE, 'delivery under way', 30_000, 10);
    const jobsBeforeKill = await jobsAdded();
    expect(jobsBeforeKill).toBeGreaterThan(0);
    const victim = await cluster.masterOf(hashTagSlot(prefixes()[0]!.slice(1, -1)));
    const inFlightAtKill = (await statusCounts(t)).in_flight ?? 0;
    const queuedAtKill = (await statusCounts(t)).queued ?? 0;
    const killedAt = Date.now();
    await cluster.kill(victim);
    await cluster.waitForFailover(victim);
    const failoverMs = Date.now() - killedAt;
    await eventually(async () => (await t.call('GET', '/readyz')).status === 200, 'api ready again after the failover', 15_000, 100);
    const eventIds = await publishing;

    // Work goes through the cluster again: published a few at a time until the queues take jobs
    // (for a few seconds after a refused hand-off a worker keeps everything it admits).
    const jobsAfterFailover = await jobsAdded();
    const until = Date.now() + AFTER_WITHIN_MS;
    for (let batch = 0; Date.now() < until; batch++) {
      eventIds.push(...(await publishMany(tenant, 10, 8, `order.after${batch}`)));
      if ((await jobsAdded()) > jobsAfterFailover) break;
      await sleep(500);
    }
    expect(await jobsAdded(), 'jobs queued to the cluster after the failover').toBeGreaterThan(jobsAfterFailover);

    const total = eventIds.length * ENDPOINTS.length;
    await eventually(async () => (await statusCounts(t)).succeeded === total, `all ${total} deliveries succeeded`, 60_000, 200).catch(async (err: Error) => {
      // Where the rest were when it gave up: queued or in flight (a lease not yet run out), pending, dead.
      throw new Error(`${err.message}; by status then: ${JSON.stringify(await statusCounts(t))}`);
    });
    const settledMs = Date.now() - killedAt;

    // Every event reached every endpoint, and each (event, endpoint) always under the same
    // webhook-id: repeats of one attempt are allowed (at-least-once), a second identity is not.
    // An event is known by what was published: its type and its index in the batch.
    for (const name of ENDPOINTS) {
      const requests = receiver.requests.filter((r) => r.path === `/${name}`);
      expect(new Set(requests.map((r) => String(r.headers['webhook-id']))), `endpoint ${name}`).toEqual(new Set(eventIds));
      const idsPerEvent = new Map<string, Set<string>>();
      for (const r of requests) {
        const { type, data } = JSON.parse(r.body) as { type: string; data: { i: number } };
        const key = `${type}#${data.i}`;
        idsPerEvent.set(key, (idsPerEvent.get(key) ?? new Set()).add(String(r.headers['webhook-id'])));
      }
      for (const ids of idsPerEvent.values()) expect(ids.size).toBe(1);
      expect(idsPerEvent.size).toBe(eventIds.length);
    }
    const stats = await expectNoViolations({
      db: t.platform.db,
      receivers: [receiver],
      metricsText: [await metricsOf(t.url), ...(await Promise.all(workerUrls.map(metricsOf)))],
    });
    expect(stats.succeeded).toBe(total);
    // Why attempts were repeated (a redelivery is an attempt that failed after reaching the receiver).
    const failed = await attemptsListed(t.platform.db).whereNot({ outcome: 'success' }).select('error_class').count<{ error_class: string | null; n: string }[]>('* as n').groupBy('error_class');
    measured('redis-cluster-failover', {
      deliveries: total,
      jobsBeforeKill,
      inFlightAtKill,
      queuedAtKill,
      failoverMs,
      msFromKillToAllSettled: settledMs,
      redeliveries: stats.redeliveries,
      failedAttempts: failed.map((r) => `${r.error_class ?? 'http'}:${r.n}`).join(',') || 'none',
    });
  });
});
