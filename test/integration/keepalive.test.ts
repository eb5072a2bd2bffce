/**
 * Every connection the platform holds to PostgreSQL and Redis has the kernel send TCP keepalive
 * probes after 30 s idle (src/infra/keepalive.ts), so a NAT that forgets idle flows cannot cut an
 * idle one silently. Checked on the sockets themselves: `ss` shows each one's keepalive timer.
 */
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, warmPool } from '../../src/infra/db.js';
import { keepAliveIdleMs } from '../../src/infra/keepalive.js';
import { clusterOptions, createRedis, type RedisRole } from '../../src/infra/redis.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

/** Seconds left on the keepalive timer of the established socket from this local port. */
function keepAliveTimer(localPort: number): number {
  const socket = execFileSync('ss', ['-tnoH', 'state', 'established', `( sport = :${localPort} )`], { encoding: 'utf8' });
  const timer = /timer:\(keepalive,(\d+)sec/.exec(socket);
  if (!timer) throw new Error(`no keepalive timer on the socket from port ${localPort}: ${socket || '(no such socket)'}`);
  return Number(timer[1]);
}

describe('TCP keepalive', () => {
  it('on every pooled PostgreSQL connection', async () => {
    const url = new URL(database.url);
    url.searchParams.set('application_name', 'keepalive-pool');
    const db = createDb({ url: url.toString(), poolMax: 2, poolMin: 2 });
    const observer = new pg.Client({ connectionString: database.url });
    await observer.connect();
    try {
      await warmPool(db, 2);
      const { rows } = await observer.query<{ port: number }>("SELECT client_port AS port FROM pg_stat_activity WHERE application_name = 'keepalive-pool'");
      expect(rows).toHaveLength(2);
      for (const { port } of rows) expect(keepAliveTimer(port)).toBeLessThanOrEqual(keepAliveIdleMs / 1000);
    } finally {
      await observer.end();
      await db.destroy();
    }
  });

  it.each<RedisRole>(['request', 'worker'])('on a %s connection to Redis', async (role) => {
    const redis = createRedis(redisUrl, role);
    try {
      // A request connection has no offline queue: it answers once ready.
      if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
      expect(await redis.ping()).toBe('PONG');
      expect(keepAliveTimer(redis.stream.localPort!)).toBeLessThanOrEqual(keepAliveIdleMs / 1000);
    } finally {
      redis.disconnect();
    }
  });

  it("on a cluster's node connections, where ioredis reads it", () => {
    for (const role of ['request', 'worker'] as const) expect(clusterOptions(redisUrl, role).redisOptions).toMatchObject({ keepAlive: keepAliveIdleMs });
  });
});
