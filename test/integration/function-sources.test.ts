import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { applyFunctionSources, functionsDirectory, functionsTable, readFunctionSources } from '../../src/infra/function-sources.js';
import { createEmptyDatabase } from '../helpers/database.js';

/**
 * Every SQL function of a migrated database is exactly its file in db/functions: a function that
 * a migration made without a file, a file whose function is missing, or a file whose text differs
 * from what the database runs all fail here.
 */

const fileNames = readdirSync(functionsDirectory)
  .filter((f) => f.endsWith('.sql'))
  .map((f) => f.slice(0, -'.sql'.length))
  .sort();

/** Each function of the schema as PostgreSQL prints it back: signature, options and body. */
async function definitions(db: Knex): Promise<Map<string, string>> {
  const { rows } = await db.raw<{ rows: Array<{ signature: string; def: string }> }>(`
    SELECT p.oid::regprocedure::text AS signature, pg_get_functiondef(p.oid) AS def
      FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace ORDER BY 1`);
  return new Map(rows.map((r) => [r.signature, r.def]));
}

async function functionNames(db: Knex): Promise<string[]> {
  const { rows } = await db.raw<{ rows: Array<{ proname: string }> }>(
    'SELECT DISTINCT proname FROM pg_proc WHERE pronamespace = current_schema()::regnamespace ORDER BY 1',
  );
  return rows.map((r) => r.proname);
}

/** What the schema's functions become when every file is run again, in a transaction rolled back. */
async function definitionsAfterRunningFiles(db: Knex, directory = functionsDirectory): Promise<Map<string, string>> {
  let after = new Map<string, string>();
  await db
    .transaction(async (trx) => {
      await trx.raw('SET LOCAL check_function_bodies = off');
      for (const source of readFunctionSources(directory)) await trx.raw(source.sql);
      after = await definitions(trx);
      throw new Error('rolled back');
    })
    .catch((err: Error) => {
      if (err.message !== 'rolled back') throw err;
    });
  return after;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('SQL functions from db/functions', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });
  const scratch = mkdtempSync(join(tmpdir(), 'whr-functions-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  async function emptyDatabase(): Promise<Knex> {
    return (await emptyDatabaseAt()).db;
  }

  async function emptyDatabaseAt(): Promise<{ db: Knex; url: string }> {
    const database = await createEmptyDatabase();
    const db = createDb({ url: database.url, poolMax: 3, timeoutMs: 30_000 });
    cleanup.push(async () => {
      await db.destroy();
      await database.drop();
    });
    return { db, url: database.url };
  }

  /** A copy of db/functions the test may change. */
  function copyOfSources(): string {
    const dir = mkdtempSync(join(scratch, 'functions-'));
    cpSync(functionsDirectory, dir, { recursive: true });
    return dir;
  }

  it('a migrated database has exactly one function per file, each as its file defines it', async () => {
    const db = await emptyDatabase();
    await migrateLatest(db);

    // No function without a file and no file without a function; one name is one file, so a
    // file holding overloads shows up below as a signature the database does not have.
    expect(await functionNames(db)).toEqual(fileNames);
    const migrated = await definitions(db);
    expect([...(await definitionsAfterRunningFiles(db)).entries()]).toEqual([...migrated.entries()]);

    const recorded = await db(functionsTable).select('name', 'checksum').orderBy('name');
    expect(recorded).toEqual(fileNames.map((name) => ({ name, checksum: sha256(readFileSync(join(functionsDirectory, `${name}.sql`), 'utf8')) })));
  });

  it('applies a file again only when its checksum changed, and a function that went missing', async () => {
    const db = await emptyDatabase();
    const sources = copyOfSources();
    expect(await migrateLatest(db, sources)).toEqual(fileNames);
    expect(await migrateLatest(db, sources)).toEqual([]);

    // A changed body reaches the database on the next migrate, and only that file is applied.
    const file = join(sources, 'typeid_time.sql');
    const changed = readFileSync(file, 'utf8').replace('AS $function$\n', 'AS $function$\n-- changed by the test\n');
    expect(changed).not.toEqual(readFileSync(file, 'utf8'));
    writeFileSync(file, changed);
    // Until migrate runs, the database and the files differ, and the comparison above says so.
    expect([...(await definitionsAfterRunningFiles(db, sources)).entries()]).not.toEqual([...(await definitions(db)).entries()]);
    const before = await db(functionsTable).where({ name: 'next_due' }).first();
    expect(await migrateLatest(db, sources)).toEqual(['typeid_time']);
    expect(await db(functionsTable).where({ name: 'typeid_time' }).first('checksum')).toEqual({ checksum: sha256(changed) });
    expect(await db(functionsTable).where({ name: 'next_due' }).first()).toEqual(before);
    const { rows } = await db.raw<{ rows: Array<{ prosrc: string }> }>("SELECT prosrc FROM pg_proc WHERE proname = 'typeid_time'");
    expect(rows[0]!.prosrc).toContain('-- changed by the test');
    expect([...(await definitionsAfterRunningFiles(db, sources)).entries()]).toEqual([...(await definitions(db)).entries()]);
    expect(await migrateLatest(db, sources)).toEqual([]);

    // Dropped by hand (or by a versioned migration's down): the file brings it back.
    await db.raw('DROP FUNCTION typeid_time(text)');
    expect(await migrateLatest(db, sources)).toEqual(['typeid_time']);
    expect(await functionNames(db)).toEqual(fileNames);
  });

  it('two migrators applying at once apply each file once', async () => {
    const { db, url } = await emptyDatabaseAt();
    await db.migrate.latest();
    const other = createDb({ url, poolMax: 2, timeoutMs: 30_000 });
    cleanup.unshift(() => other.destroy());
    const [a, b] = await Promise.all([applyFunctionSources(db), applyFunctionSources(other)]);
    expect([...a, ...b].sort()).toEqual(fileNames);
    expect(await functionNames(db)).toEqual(fileNames);
  });

  it('an older release never puts back its text over a newer one, and runs on a newer schema as it is', async () => {
    const db = await emptyDatabase();
    const newer = copyOfSources();
    const file = join(newer, 'typeid_time.sql');
    writeFileSync(file, readFileSync(file, 'utf8').replace('AS $function$\n', 'AS $function$\n-- release 0.2.0\n'));
    expect(await migrateLatest(db, newer, { release: '0.2.0' })).toEqual(fileNames);

    // A 0.1.0 process restarting mid-deploy: its older file is left unapplied.
    expect(await migrateLatest(db, functionsDirectory, { release: '0.1.0' })).toEqual([]);
    const { rows } = await db.raw<{ rows: Array<{ prosrc: string }> }>("SELECT prosrc FROM pg_proc WHERE proname = 'typeid_time'");
    expect(rows[0]!.prosrc).toContain('-- release 0.2.0');

    // A migration this code does not know: the database is ahead; nothing is migrated, and the caller is told.
    await db('knex_migrations').insert({ name: '29991231000001_from_the_future', batch: 99, migration_time: new Date() });
    const told: string[][] = [];
    expect(await migrateLatest(db, newer, { release: '0.2.0', onDatabaseAhead: (unknown) => told.push(unknown) })).toEqual([]);
    expect(told).toEqual([['29991231000001_from_the_future']]);
  });
});
