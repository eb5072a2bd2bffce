/**
 * A process opens its pool before it reports ready (warmPool; DB_POOL_MIN defaults to the whole
 * pool). A server that turns part of it away (its max_connections, full during a rollout) must not
 * keep the process from starting: it starts with the connections it got, and says why it has
 * fewer. A server that turns every connection away stops warmPool with the error.
 * The refusals come from a real TCP proxy in front of the test database that forwards a fixed
 * number of connections and closes the rest (PostgreSQL's own limits are approximate when
 * connections arrive together, as warmPool's do).
 */
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, warmPool, warmUpsAtOnce } from '../../src/infra/db.js';
import { statement } from '../../src/infra/sql.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startTestPlatform } from '../helpers/platform.js';
import { proxyDatabase } from '../helpers/tcp-proxy.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database?.drop();
});

describe('opening the pool at start', () => {
  it('keeps the connections the server lets through and reports why it has fewer', async () => {
    const { proxy, url } = await proxyDatabase(database.url, { maxConnections: 2 });
    const db = createDb({ url, poolMax: 5, poolMin: 5 });
    try {
      const warmed = await warmPool(db, 5);
      expect(warmed.opened).toBe(2);
      expect(warmed.refused).toBeInstanceOf(Error);
      // The pool serves with what it kept.
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.destroy();
      await proxy.close();
    }
  });

  it('opens the whole pool when the server allows it', async () => {
    const db = createDb({ url: database.url, poolMax: 6, poolMin: 6 });
    try {
      expect(await warmPool(db, 6)).toEqual({ opened: 6 });
    } finally {
      await db.destroy();
    }
  });

  /** Opens a pool of 6 with warmPool, counting the warm-ups that ran and how many ran at once. */
  async function warmSix(atOnce?: number): Promise<{ opened: number; warmed: number; most: number }> {
    const wave = atOnce ?? 6;
    let running = 0;
    let arrived = 0;
    let most = 0;
    let warmed = 0;
    const db = createDb({
      url: database.url,
      poolMax: 6,
      poolMin: 6,
      warmUps: [
        async (run) => {
          running++;
          arrived++;
          most = Math.max(most, running);
          // Held until its wave has all arrived (all six, opened at once), however slowly a loaded
          // host connects them: so a wave's warm-ups overlap, and a bigger wave than asked for shows.
          const waveEnd = Math.min(6, Math.ceil(arrived / wave) * wave);
          const until = Date.now() + 10_000;
          while (arrived < waveEnd && Date.now() < until) await sleep(10);
          await run(statement('pool_start_warm_up', 'SELECT 1'), {});
          running--;
          warmed++;
        },
      ],
    });
    try {
      const { opened } = await warmPool(db, 6, atOnce);
      return { opened, warmed, most };
    } finally {
      await db.destroy();
    }
  }

  it('at start, warms every connection in waves: planning locks every partition of events', async () => {
    expect(await warmSix(warmUpsAtOnce)).toEqual({ opened: 6, warmed: 6, most: warmUpsAtOnce });
  });

  it('a refill while serving opens what it lacks at once', async () => {
    expect(await warmSix()).toEqual({ opened: 6, warmed: 6, most: 6 });
  });

  it('throws when the server turns every connection away', async () => {
    const { proxy, url } = await proxyDatabase(database.url);
    proxy.cut('refuse');
    const db = createDb({ url, poolMax: 3, poolMin: 3, timeoutMs: 2_000 });
    try {
      await expect(warmPool(db, 3)).rejects.toThrow();
    } finally {
      await db.destroy();
      await proxy.close();
    }
  });

  it('a platform whose server lets through part of its pool starts, serves, and warns', async () => {
    // Room for the platform's own checks and retention (outside the pool warmPool fills) and 3 of its 6.
    const { proxy, url } = await proxyDatabase(database.url, { maxConnections: 4 });
    let logs = '';
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logs += chunk.toString()), done()) });
    const t = await startTestPlatform({ role: 'api', database, env: { DATABASE_URL: url, DB_POOL_MAX: '6', DB_POOL_MIN: '6' }, logs: sink });
    try {
      const warning = logs.split('\n').find((line) => line.includes('"level":40') && line.includes('opened only part of the database pool'));
      expect(warning, logs.slice(-2000)).toBeDefined();
      const logged = JSON.parse(warning!) as { opened: number; wanted: number };
      expect(logged.wanted).toBe(6);
      expect(logged.opened).toBeGreaterThan(0);
      expect(logged.opened).toBeLessThan(6);
      const tenant = await t.createTenant('pool-start');
      const res = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { n: 1 } } });
      expect(res.status).toBe(202);
    } finally {
      await t.stop();
      await proxy.close();
    }
  });
});
