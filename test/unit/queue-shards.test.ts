import { typeid } from 'typeid-js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { configError, requiredEnv } from '../helpers/config.js';
import { shardConcurrency } from '../../src/outbound/dispatcher.js';
import { hashTagSlot, shardOf, shardPrefixes } from '../../src/outbound/job-queue.js';
import { clusterOptions } from '../../src/infra/redis.js';

const required = requiredEnv;

describe('REDIS_CLUSTER_NODES and QUEUE_SHARDS', () => {
  it('a single Redis has one shard and no cluster unless told otherwise; a cluster has 16 shards by default', () => {
    expect(loadConfig(required)).toMatchObject({ queueShards: 1, redisClusterNodes: undefined });
    const cluster = loadConfig({ ...required, REDIS_CLUSTER_NODES: 'redis-0.redis:6379, 10.0.0.7:7001,[::1]:7002' });
    expect(cluster.redisClusterNodes).toEqual([
      { host: 'redis-0.redis', port: 6379 },
      { host: '10.0.0.7', port: 7001 },
      { host: '::1', port: 7002 },
    ]);
    expect(cluster.queueShards).toBe(16);
    expect(loadConfig({ ...required, REDIS_CLUSTER_NODES: 'r:6379', QUEUE_SHARDS: '4' }).queueShards).toBe(4);
    expect(loadConfig({ ...required, QUEUE_SHARDS: '8' }).queueShards).toBe(8);
  });

  it.each(['redis', 'redis:', ':6379', 'redis:0', 'redis:70000', 'redis:6379,', 'redis://r:6379', 'r:6379;s:6379', '::1:7000'])(
    'refuses REDIS_CLUSTER_NODES=%s with one line naming it and the bad entry',
    (value) => {
      const message = configError({ REDIS_CLUSTER_NODES: value });
      expect(message).toMatch(/^invalid configuration: REDIS_CLUSTER_NODES: must be a comma-separated list of host:port, got "/);
      expect(message).not.toContain('\n');
    },
  );

  it.each(['0', '257', 'many', '2.5'])('refuses QUEUE_SHARDS=%s', (value) => {
    expect(configError({ QUEUE_SHARDS: value })).toMatch(/^invalid configuration: QUEUE_SHARDS: /);
  });

  it('refuses more shards than worker slots, naming the default when it was not set', () => {
    expect(configError({ QUEUE_SHARDS: '8', WORKER_CONCURRENCY: '4' })).toBe('invalid configuration: QUEUE_SHARDS: must not exceed WORKER_CONCURRENCY (4)');
    expect(configError({ REDIS_CLUSTER_NODES: 'r:6379', WORKER_CONCURRENCY: '10' })).toBe(
      'invalid configuration: QUEUE_SHARDS (16, the default on a cluster): must not exceed WORKER_CONCURRENCY (10)',
    );
  });
});

describe('queue layout', () => {
  it('computes slots the way Redis Cluster does (CRC16-XMODEM mod 16384)', () => {
    // Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
    expect(hashTagSlot('123456789')).toBe(12739);
    expect(hashTagSlot('foo')).toBe(12182);
    expect(hashTagSlot('bar')).toBe(5061);
  });

  it('keeps the single-Redis layout for one shard, and tags each shard into its own slice of the slots otherwise', () => {
    expect(shardPrefixes('whr', 1, false)).toEqual(['whr']);
    expect(shardPrefixes('whr', 1, true)).toEqual([expect.stringMatching(/^\{whr:0(\.\d+)?\}$/)]);
    for (const shards of [2, 3, 16, 256]) {
      const prefixes = shardPrefixes('whr', shards, true);
      expect(prefixes).toEqual(shardPrefixes('whr', shards, false)); // the layout depends on nothing else
      expect(new Set(prefixes).size).toBe(shards);
      prefixes.forEach((prefix, i) => {
        const tag = /^\{(whr:(\d+)(?:\.\d+)?)\}$/.exec(prefix)!;
        expect(Number(tag[2])).toBe(i);
        const slot = hashTagSlot(tag[1]!);
        expect(slot).toBeGreaterThanOrEqual(Math.floor((i * 16384) / shards));
        expect(slot).toBeLessThan(Math.floor(((i + 1) * 16384) / shards));
      });
    }
  });

  it('picks a stable shard per delivery and spreads deliveries evenly', () => {
    const ids = Array.from({ length: 16_000 }, () => typeid('dlv').toString());
    const counts = new Array<number>(16).fill(0);
    for (const id of ids) {
      const shard = shardOf(id, 16);
      expect(shardOf(id, 16)).toBe(shard);
      counts[shard]!++;
    }
    for (const n of counts) expect(n).toBeGreaterThan(800); // mean 1000
    expect(shardOf(ids[0]!, 1)).toBe(0);
  });

  it('splits WORKER_CONCURRENCY over the shards without exceeding it', () => {
    expect(shardConcurrency(200, 1)).toEqual([200]);
    expect(shardConcurrency(200, 16)).toEqual([13, 13, 13, 13, 13, 13, 13, 13, 12, 12, 12, 12, 12, 12, 12, 12]);
    for (const [total, shards] of [[16, 16], [17, 16], [5000, 256], [7, 3]] as const) {
      const split = shardConcurrency(total, shards);
      expect(split.reduce((a, b) => a + b, 0)).toBe(total);
      expect(Math.min(...split)).toBeGreaterThanOrEqual(1);
      expect(Math.max(...split) - Math.min(...split)).toBeLessThanOrEqual(1);
    }
  });
});

describe('cluster client options', () => {
  it('blocking workers retry forever and queue while disconnected; request clients fail fast', () => {
    expect(clusterOptions('redis://127.0.0.1:6379', 'worker')).toMatchObject({ enableOfflineQueue: true, redisOptions: { maxRetriesPerRequest: null } });
    const request = clusterOptions('redis://127.0.0.1:6379', 'request');
    expect(request).toMatchObject({ enableOfflineQueue: false, redisOptions: { maxRetriesPerRequest: 1, commandTimeout: 1_000 } });
    expect(request.redisOptions).not.toHaveProperty('password');
  });

  it('takes credentials and TLS from REDIS_URL', () => {
    const options = clusterOptions('rediss://relay:p%40ss@ignored.example:6380', 'worker');
    expect(options.redisOptions).toMatchObject({ username: 'relay', password: 'p@ss', tls: {} });
  });
});
