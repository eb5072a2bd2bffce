import type { Knex } from 'knex';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, isStorageUnavailable, statementTimeoutMs } from '../../src/infra/db.js';
import { createEmptyDatabase, type TestDatabase } from '../helpers/database.js';

/**
 * A statement the client stops waiting for must not commit later, unseen: the server cancels it
 * first. Here a row lock held by another session blocks an UPDATE past the pool's timeouts; once
 * the lock is let go, the row must be as it was.
 */
describe("the server cancels a statement before the client stops waiting", () => {
  const timeoutMs = 200;
  let database: TestDatabase;
  let db: Knex;
  let holder: pg.Client;

  beforeAll(async () => {
    database = await createEmptyDatabase();
    db = createDb({ url: database.url, poolMax: 2, timeoutMs });
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
});
