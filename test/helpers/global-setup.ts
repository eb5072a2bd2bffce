import pg from 'pg';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { ensureServices } from '../../src/infra/ensure-services.js';
import { installTransitionLog } from './transition-log.js';

export const pgAdminUrl = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/**
 * One template per test run, named in the environment the test workers inherit, so two runs on
 * one machine never drop each other's databases.
 */
export const templateDatabase = (process.env.WHR_TEMPLATE_DB ??= `whr_tpl_${process.pid}`);

/**
 * Migrates one template database per run; each test file then copies it (CREATE DATABASE ...
 * TEMPLATE), which takes milliseconds and isolates files from each other on real PostgreSQL.
 */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  await ensureServices(pgAdminUrl, redisUrl);
  const admin = new pg.Client({ connectionString: pgAdminUrl });
  await admin.connect();
  try {
    // Leftovers of interrupted runs would accumulate. Every test database carries the pid of the run
    // that made it, so only those whose run is gone are dropped: a run in progress keeps its own.
    const { rows } = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname ~ '^whr_(t|tpl)_[0-9]+'");
    for (const { datname } of rows) {
      const pid = Number(/^whr_(?:t|tpl)_(\d+)/.exec(datname)![1]);
      if (!processAlive(pid)) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch(() => undefined);
    }
    await admin.query(`DROP DATABASE IF EXISTS "${templateDatabase}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${templateDatabase}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(pgAdminUrl);
  url.pathname = `/${templateDatabase}`;
  const db = createDb({ url: url.toString(), poolMax: 1, timeoutMs: 30_000 });
  try {
    await migrateLatest(db);
    await installTransitionLog(db);
  } finally {
    await db.destroy();
  }
  return async () => {
    const client = new pg.Client({ connectionString: pgAdminUrl });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${templateDatabase}" WITH (FORCE)`).finally(() => client.end());
  };
}
