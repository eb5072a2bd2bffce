/**
 * A pool with a minimum (the platform's whole pool, DB_POOL_MIN) opens its connections again when
 * they die: PostgreSQL restarting or terminating them, or a network path cut, without waiting for
 * a burst to need them. Checked on the connections PostgreSQL sees (pg_stat_activity, by
 * application_name).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Knex } from 'knex';
import { createDb, warmPool } from '../../src/infra/db.js';
import { within } from '../../src/infra/within.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { eventually } from '../helpers/platform.js';
import { proxyDatabase } from '../helpers/tcp-proxy.js';

let database: TestDatabase;
let observer: pg.Client;

beforeAll(async () => {
  database = await createTestDatabase();
  observer = new pg.Client({ connectionString: database.url });
  await observer.connect();
});

afterAll(async () => {
  await observer?.end();
  await database?.drop();
});

function named(url: string, applicationName: string): string {
  const u = new URL(url);
  u.searchParams.set('application_name', applicationName);
  return u.toString();
}

async function backends(applicationName: string): Promise<Array<{ pid: number; port: number }>> {
  const { rows } = await observer.query<{ pid: number; port: number }>(
    'SELECT pid, client_port AS port FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid',
    [applicationName],
  );
  return rows;
}

/** PostgreSQL ends every backend of the pool named `applicationName`, as a restart would. */
async function terminate(applicationName: string): Promise<void> {
  await observer.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
}

/**
 * A promise that resolves once each of the pool's `count` connections has seen its socket close:
 * pg_stat_activity drops a terminated backend before the client has necessarily read the server's
 * last message, and a statement sent meanwhile gets that message as its error.
 */
async function watchEnds(db: Knex, count: number): Promise<{ ended: Promise<void> }> {
  const clients = await Promise.all(Array.from({ length: count }, () => db.client.acquireConnection() as Promise<pg.Client>));
  const ended = clients.map((client) => new Promise<void>((resolve) => client.once('end', () => resolve())));
  for (const client of clients) await db.client.releaseConnection(client);
  return { ended: Promise.all(ended).then(() => undefined) };
}

/** A logger that keeps what it is told, for the refill's own lines. */
function keptLog() {
  const lines: Array<{ level: string; msg: string }> = [];
  const at = (level: string) => (_detail: unknown, msg?: string) => void lines.push({ level, msg: msg ?? String(_detail) });
  return { lines, logger: { warn: at('warn'), info: at('info'), debug: at('debug') } as never };
}

describe('a pool with a minimum after its connections die', () => {
  it('opens them again when PostgreSQL terminates them, before any statement needs one', async () => {
    const app = 'pool-refill-terminated';
    const db = createDb({ url: named(database.url, app), poolMax: 4, poolMin: 4 });
    try {
      await warmPool(db, 4);
      const before = await backends(app);
      expect(before).toHaveLength(4);
      await terminate(app);
      // No statement goes through the pool until its four connections are back, all of them new.
      const after = await eventually(async () => {
        const now = await backends(app);
        return now.length === 4 && now.every((b) => !before.some((old) => old.pid === b.pid)) && now;
      }, 'four new backends for the pool');
      expect(after).toHaveLength(4);
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(await backends(app)).toHaveLength(4);
    } finally {
      await db.destroy();
    }
  });

  it('tries again while the server is unreachable, and fills the pool once it is back', async () => {
    const app = 'pool-refill-cut';
    const { proxy, url } = await proxyDatabase(database.url);
    const { lines, logger } = keptLog();
    const db = createDb({ url: named(url, app), poolMax: 3, poolMin: 3, timeoutMs: 2_000, logger });
    try {
      await warmPool(db, 3);
      expect(await backends(app)).toHaveLength(3);
      proxy.cut('refuse');
      // The proxy drops the three and turns away every try: two rounds of three at least.
      await eventually(async () => proxy.refused >= 6, 'two rounds of refused reconnections');
      expect(lines.some((l) => l.level === 'debug' && l.msg.includes('could not reopen the database pool yet'))).toBe(true);
      proxy.restore();
      await eventually(async () => (await backends(app)).length === 3, 'the pool open again through the proxy');
      await eventually(async () => lines.some((l) => l.level === 'info' && l.msg === 'reopened the database pool'), 'the reopened line');
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.destroy();
      await proxy.close();
    }
  });

  it('keeps what a server at its connection limit lets through, and says so', async () => {
    const app = 'pool-refill-partial';
    const { proxy, url } = await proxyDatabase(database.url, { maxConnections: 2 });
    const { lines, logger } = keptLog();
    const db = createDb({ url: named(url, app), poolMax: 3, poolMin: 3, logger });
    try {
      expect((await warmPool(db, 3)).opened).toBe(2);
      const before = await backends(app);
      await terminate(app);
      await eventually(async () => lines.some((l) => l.level === 'warn' && l.msg.startsWith('reopened only part of the database pool')), 'the partial line');
      // New ones: a terminated backend stays listed while it exits.
      await eventually(async () => {
        const now = await backends(app);
        return now.length === 2 && now.every((b) => !before.some((old) => old.pid === b.pid));
      }, 'two new backends');
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.destroy();
      await proxy.close();
    }
  });

  it('leaves a pool without a minimum to grow on demand', async () => {
    const app = 'pool-refill-none';
    const db = createDb({ url: named(database.url, app), poolMax: 3 });
    try {
      await warmPool(db, 2);
      expect(await backends(app)).toHaveLength(2);
      const { ended } = await watchEnds(db, 2);
      await terminate(app);
      await eventually(async () => (await backends(app)).length === 0, 'both backends gone');
      await within(5_000, ended, "the pool's two connections ending");
      // The next statement opens the one it needs, and nothing else was opened before it.
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      expect(await backends(app)).toHaveLength(1);
    } finally {
      await db.destroy();
    }
  });
});
