import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { ensureServices } from '../../src/infra/ensure-services.js';

export const pgAdminUrl = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const templateDatabase = 'whr_test_template';

/**
 * Migrates one template database per run; each test file then copies it (CREATE DATABASE ...
 * TEMPLATE), which takes milliseconds and isolates files from each other on real PostgreSQL.
 */
export default async function setup(): Promise<void> {
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  await ensureServices(pgAdminUrl, redisUrl);
  const admin = new pg.Client({ connectionString: pgAdminUrl });
  await admin.connect();
  try {
    // Leftovers from an interrupted run would otherwise accumulate.
    const { rows } = await admin.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'whr_t_%' OR datname = $1", [templateDatabase]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    await admin.query(`CREATE DATABASE "${templateDatabase}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(pgAdminUrl);
  url.pathname = `/${templateDatabase}`;
  const db = createDb({ url: url.toString(), poolMax: 1, timeoutMs: 30_000 });
  try {
    await migrateLatest(db);
  } finally {
    await db.destroy();
  }
  try {
    execFileSync('redis-cli', ['-u', redisUrl, 'ping'], { stdio: 'ignore' });
  } catch {
    // redis-cli is optional; ensureServices already proved Redis answers on its port.
  }
}
