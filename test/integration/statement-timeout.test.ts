import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, isStorageUnavailable, statementTimeoutMs } from '../../src/infra/db.js';
import { createEmptyDatabase, type TestDatabase } from '../helpers/database.js';
import { eventually, startTestPlatform } from '../helpers/platform.js';

/**
 * A statement the client stops waiting for must not commit later, unseen: the server cancels it
 * first, in the pools of requests and dispatch. Here a row lock held by another session blocks an
 * UPDATE past the pool's timeouts; once the lock is let go, the row must be as it was. A
 * maintenance pool (retention) is the opposite case, kept as it was.
 */
describe("the server cancels a statement before the client stops waiting", () => {
  // The server cancels at 1.5 × this, the client stops at 2 ×: a quarter second between the two,
  // for a busy machine to deliver the server's answer before the client's timer fires.
  const timeoutMs = 500;
  let database: TestDatabase;
  let db: Knex;
  let holder: pg.Client;

  beforeAll(async () => {
    database = await createEmptyDatabase();
    db = createDb({ url: database.url, poolMax: 2, timeoutMs, cancelOnServer: true });
    await db.raw('CREATE TABLE scratch (id int PRIMARY KEY, v int NOT NULL)');
    await db.raw('INSERT INTO scratch VALUES (1, 1)');
    holder = new pg.Client({ connectionString: database.url });
    await holder.connect();
  });
  afterAll(async () => {
    await holder?.end();
    await db?.destroy();
    await database?.drop();
  });

  it('a blocked write is cancelled by the server, answers as an outage, and never lands', async () => {
    expect(statementTimeoutMs(timeoutMs)).toBeLessThan(timeoutMs * 2); // before the client's query timeout
    await holder.query('BEGIN');
    await holder.query('SELECT * FROM scratch WHERE id = 1 FOR UPDATE');
    const started = Date.now();
    const failure = await db.raw('UPDATE scratch SET v = 2 WHERE id = 1').then(
      () => undefined,
      (err: unknown) => err,
    );
    const waitedMs = Date.now() - started;
    await holder.query('COMMIT');

    expect((failure as { code?: string }).code).toBe('57014'); // canceling statement due to statement timeout
    expect(isStorageUnavailable(failure)).toBe(true);
    expect(waitedMs).toBeGreaterThanOrEqual(statementTimeoutMs(timeoutMs) - 10);
    // The lock is gone: had the server kept the UPDATE, it would have committed by now.
    const { rows } = await db.raw<{ rows: Array<{ v: number }> }>('SELECT v FROM scratch WHERE id = 1 FOR UPDATE');
    expect(rows).toEqual([{ v: 1 }]);
  });

  it('a maintenance pool (retention) lets the server finish what its client stopped waiting for', async () => {
    const maintenance = createDb({ url: database.url, poolMax: 1, timeoutMs });
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT * FROM scratch WHERE id = 1 FOR UPDATE');
      const failure = await maintenance.raw('UPDATE scratch SET v = 3 WHERE id = 1').then(
        () => undefined,
        (err: unknown) => err,
      );
      await holder.query('COMMIT');
      expect(String(failure)).toContain('Query read timeout');
      // Once the lock is let go, the server completes the UPDATE: a long retention step makes
      // progress. Waited for: the read may take the row before the woken UPDATE does.
      const v = async () => (await db.raw<{ rows: Array<{ v: number }> }>('SELECT v FROM scratch WHERE id = 1')).rows[0]?.v;
      await eventually(async () => (await v()) === 3, 'the UPDATE the client gave up on, committed by the server');
    } finally {
      await maintenance.destroy();
    }
  });

  it("migrate's connection waits for a statement as long as it runs: a table's rewrite grows with its rows", async () => {
    const migrator = createDb({ url: database.url, poolMax: 1, timeoutMs, unboundedStatements: true });
    try {
      // Three times the client's query timeout of the same timeoutMs without the option (above).
      expect((await migrator.raw(`SELECT true AS slept FROM pg_sleep(${(timeoutMs * 6) / 1000})`)).rows).toEqual([{ slept: true }]);
      expect(await migrator.raw('SHOW statement_timeout').then((r: { rows: Array<{ statement_timeout: string }> }) => r.rows[0]!.statement_timeout)).toBe('0');
    } finally {
      await migrator.destroy();
    }
  });

  it("the platform's pool of requests and dispatch cancels on the server, retention's does not", async () => {
    const t = await startTestPlatform({ role: 'api' });
    try {
      const timeoutOf = async (pool: Knex) => (await pool.raw<{ rows: Array<{ statement_timeout: string }> }>('SHOW statement_timeout')).rows[0]!.statement_timeout;
      expect(await timeoutOf(t.platform.db)).toBe(`${statementTimeoutMs(5_000)}ms`);
      expect(await timeoutOf(t.platform.maintenanceDb)).toBe('0');
    } finally {
      await t.stop();
    }
  });
});
