import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { pgAdminUrl } from '../helpers/global-setup.js';
import { request } from '../helpers/http.js';
import { clearRedisPrefix, eventually, redisUrl } from '../helpers/platform.js';

/**
 * The production form of the platform: `npm run build` compiles to dist/, and `node dist/main.js
 * <role>` runs it with no TypeScript loader: the compiled migrations create a fresh database, the
 * process serves, and SIGTERM stops it with exit 0.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const dbName = `whr_t_dist_${randomBytes(5).toString('hex')}`;
const queuePrefix = `tdist${randomBytes(4).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'whr-dist-'));

async function adminQuery(sql: string, database = 'postgres'): Promise<Array<Record<string, unknown>>> {
  const url = new URL(pgAdminUrl);
  url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  await adminQuery(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
  await clearRedisPrefix(queuePrefix);
  rmSync(dir, { recursive: true, force: true });
});

describe('compiled build', () => {
  it('npm run build, then node dist/main.js all: migrates a fresh database, serves, exits 0 on SIGTERM', async () => {
    execFileSync('npm', ['run', 'build'], { cwd: root, stdio: 'pipe' });
    expect(existsSync(join(root, 'dist/main.js'))).toBe(true);
    const compiledMigrations = readdirSync(join(root, 'dist/migrations')).filter((f) => f.endsWith('.js'));
    expect(compiledMigrations.length).toBe(readdirSync(join(root, 'migrations')).filter((f) => f.endsWith('.ts')).length);

    const databaseUrl = new URL(pgAdminUrl);
    databaseUrl.pathname = `/${dbName}`;
    const env: Record<string, string> = { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: databaseUrl.toString(), REDIS_URL: redisUrl, QUEUE_PREFIX: queuePrefix, ENV_FILE: join(dir, '.env') };
    // No tsx anywhere: plain node on the compiled JavaScript.
    const child = spawn(process.execPath, ['dist/main.js', 'all'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<number | null>((res) => child.once('exit', (code) => res(code)));
    try {
      // PORT=0: the port the process got is in its "listening" log line.
      const port = await eventually(async () => /"port":(\d+),"msg":"listening"/.exec(output)?.[1], `listening; output:\n${output}`, 45_000, 100);
      const url = `http://127.0.0.1:${port}`;
      await eventually(async () => (await request(url, 'GET', '/readyz').catch(() => undefined))?.status === 200, `dist/main.js ready; output:\n${output}`, 45_000, 100);
      const migrated = await adminQuery('SELECT name FROM knex_migrations ORDER BY id', dbName);
      expect(migrated.map((m) => m.name)).toEqual(compiledMigrations.map((f) => f.replace(/\.js$/, '')).sort());
      const began = Date.now();
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(Date.now() - began).toBeLessThan(5_000);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  }, 120_000);
});
