import pg from 'pg';
import { createDb, migrateLatest } from '../../src/infra/db.js';
import { ensureServices } from '../../src/infra/ensure-services.js';

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
export default async function setup(): Promise<() => Promise<void>> {
  const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  await ensureServices(pgAdminUrl, redisUrl);
  const admin = new pg.Client({ connectionString: pgAdminUrl });
  await admin.connect();
  try {
    // Leftovers of interrupted runs would accumulate; only those nobody is connected to are dropped,
    // so a run in progress elsewhere keeps its databases.
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database d
        WHERE (datname LIKE 'whr\\_t\\_%' OR datname LIKE 'whr\\_tpl\\_%' OR datname = $1)
          AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = d.datname)`,
      [templateDatabase],
    );
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS "${datname}"`).catch(() => undefined);
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
  return async () => {
    const client = new pg.Client({ connectionString: pgAdminUrl });
    await client.connect();
    await client.query(`DROP DATABASE IF EXISTS "${templateDatabase}" WITH (FORCE)`).finally(() => client.end());
  };
}
