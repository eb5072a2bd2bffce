/**
 * A process opens its pool before it reports ready (warmPool; DB_POOL_MIN defaults to the whole
 * pool). A server that refuses part of it (its max_connections, a role's connection limit) must
 * not keep the process from starting: warmPool keeps what it got and says why the rest failed. A
 * server that refuses every connection is a missing database, and warmPool throws.
 * The limited role is a real PostgreSQL role with CONNECTION LIMIT 2 (superusers ignore limits).
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, warmPool } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { pgAdminUrl } from '../helpers/global-setup.js';

const role = `whr_limited_${randomBytes(4).toString('hex')}`;
let database: TestDatabase;

async function admin(sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: pgAdminUrl });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  database = await createTestDatabase();
  await admin(`CREATE ROLE ${role} LOGIN CONNECTION LIMIT 2`);
});

afterAll(async () => {
  await database?.drop();
  await admin(`DROP ROLE IF EXISTS ${role}`);
});

describe('opening the pool at start', () => {
  it('keeps the connections the server allows and reports why it refused the rest', async () => {
    const url = new URL(database.url);
    url.username = role;
    const db = createDb({ url: url.toString(), poolMax: 5, poolMin: 5 });
    try {
      const warmed = await warmPool(db, 5);
      expect(warmed.opened).toBe(2);
      expect(warmed.refused?.message).toMatch(/too many connections for role/);
      const sessions = await admin(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE usename = '${role}'`);
      expect(sessions.rows[0]).toEqual({ n: 2 });
      // The pool serves with what it kept.
      expect((await db.raw('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    } finally {
      await db.destroy();
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

  it('throws when the server refuses every connection', async () => {
    const url = new URL(database.url);
    url.username = `${role}_absent`;
    const db = createDb({ url: url.toString(), poolMax: 3, poolMin: 3 });
    try {
      await expect(warmPool(db, 3)).rejects.toThrow(/role .* does not exist/);
    } finally {
      await db.destroy();
    }
  });
});
