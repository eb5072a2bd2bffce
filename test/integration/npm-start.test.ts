import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { migrationsDirectory } from '../../src/infra/db.js';
import { pgAdminUrl } from '../helpers/global-setup.js';
import { request } from '../helpers/http.js';
import { clearRedisPrefix, eventually, redisUrl } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * `npm start` from nothing, as a real child process: no ADMIN_TOKEN, no SECRETS_KEY, no NODE_ENV and a
 * database that does not exist yet. Only the port, the database name, the .env location (ENV_FILE,
 * so the clone's own .env is untouched) and the Redis key prefix differ from a fresh clone.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tsxCli = join(root, 'node_modules/tsx/dist/cli.mjs');
const tokenLine = /Generated ADMIN_TOKEN \(kept in \.env\): (\S+)/g;

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const server = createServer();
    server.on('error', rej);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => res(port));
    });
  });
}

async function pgQuery<T extends pg.QueryResultRow>(sql: string, params: unknown[] = [], database = 'postgres'): Promise<T[]> {
  const url = new URL(pgAdminUrl);
  url.pathname = `/${database}`;
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

interface Started {
  child: ChildProcess;
  url: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

describe('npm start from nothing', () => {
  const dir = mkdtempSync(join(tmpdir(), 'whr-start-'));
  const envFile = join(dir, '.env');
  // whr_t_ names are swept by the global setup if this run is interrupted.
  const dbName = `whr_t_start_${randomBytes(5).toString('hex')}`;
  const queuePrefix = `tstart${randomBytes(4).toString('hex')}`;
  const databaseUrl = (() => {
    const u = new URL(pgAdminUrl);
    u.pathname = `/${dbName}`;
    return u.toString();
  })();
  const children: ChildProcess[] = [];
  let receiver: Receiver | undefined;
  let token = '';
  let tenant = { id: '', apiKey: '' };
  const sourceSecret = 'source-secret-kept-across-restarts';
  let sourceId = '';
  // Held open between starts: test runs sweep unused whr_t_ databases, and this one must survive a restart.
  let holder: pg.Client | undefined;

  /** The platform as a child process: `npm start` itself, or node running the same entry point. */
  async function start(extraEnv: Record<string, string> = {}, { viaNpm = false } = {}): Promise<Started> {
    const port = await freePort();
    const env: Record<string, string> = {};
    // Only what a shell needs; none of the platform's own variables leak in from the test runner.
    for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[name]) env[name] = process.env[name]!;
    Object.assign(env, { PORT: String(port), DATABASE_URL: databaseUrl, ENV_FILE: envFile, QUEUE_PREFIX: queuePrefix }, extraEnv);
    if (process.env.TEST_REDIS_URL) env.REDIS_URL = redisUrl;
    const child = viaNpm
      ? spawn('npm', ['start'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(process.execPath, [tsxCli, 'src/main.ts', 'all'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let output = '';
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.once('exit', (code, signal) => res({ code, signal })));
    const url = `http://127.0.0.1:${port}`;
    let gone = false;
    void exited.then(() => (gone = true));
    await eventually(
      async () => {
        if (gone) throw new Error(`npm start exited early:\n${output}`);
        return (await request(url, 'GET', '/readyz').catch(() => undefined))?.status === 200;
      },
      `readyz on ${url}; output so far:\n${output}`,
      45_000,
      100,
    );
    return { child, url, output: () => output, exited };
  }

  async function stop(s: Started): Promise<{ code: number | null; ms: number }> {
    const began = Date.now();
    s.child.kill('SIGTERM');
    const { code } = await s.exited;
    return { code, ms: Date.now() - began };
  }

  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await receiver?.close();
    await holder?.end();
    await pgQuery(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await clearRedisPrefix(queuePrefix);
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates the database, migrates it, prints the generated admin token once and serves with it', async () => {
    expect(await pgQuery('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).toHaveLength(0);
    const run = await start();

    const printed = [...run.output().matchAll(tokenLine)].map((m) => m[1]!);
    expect(printed).toHaveLength(1);
    token = printed[0]!;
    const kept = readFileSync(envFile, 'utf8');
    expect(kept).toContain(`ADMIN_TOKEN=${token}`);
    expect(kept).toMatch(/^SECRETS_KEY=\S{44}$/m);

    expect(await pgQuery('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).toHaveLength(1);
    holder = new pg.Client({ connectionString: databaseUrl });
    await holder.connect();
    const migrated = await pgQuery<{ name: string }>('SELECT name FROM knex_migrations ORDER BY id', [], dbName);
    const files = readdirSync(migrationsDirectory).filter((f) => /^\d+_[a-z0-9_]+\.ts$/.test(f)).map((f) => f.replace(/\.ts$/, ''));
    expect(migrated.map((m) => m.name)).toEqual(files.sort());

    expect((await request(run.url, 'GET', '/healthz')).status).toBe(200);
    expect((await request(run.url, 'GET', '/readyz')).body).toMatchObject({ database: true, redis: true });
    const created = await request(run.url, 'POST', '/admin/tenants', { token, body: { name: 'first' } });
    expect(created.status).toBe(201);
    tenant = created.body;
    const source = await request(run.url, 'POST', '/v1/sources', { token: tenant.apiKey, body: { type: 'momo-communication', name: 'kept', secret: sourceSecret } });
    expect(source.status).toBe(201);
    sourceId = source.body.id;

    const stopped = await stop(run);
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5_000);
  }, 60_000);

  it('starts again without printing a token; the kept token, API key and secrets key still work', async () => {
    expect(token).not.toBe('');
    const envBefore = readFileSync(envFile, 'utf8');
    const run = await start();
    expect(run.output()).not.toMatch(tokenLine);
    expect(run.output()).not.toContain(token);
    expect(readFileSync(envFile, 'utf8')).toBe(envBefore);

    expect((await request(run.url, 'POST', '/admin/tenants', { token, body: { name: 'second' } })).status).toBe(201);
    const listed = await request(run.url, 'GET', '/v1/sources', { token: tenant.apiKey });
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.map((s: { id: string }) => s.id)).toEqual([sourceId]);
    // The source secret was sealed with the SECRETS_KEY of the first start: it must still open.
    const body = communication.messageStatus('m-restart', 'delivered');
    const callback = await request(run.url, 'POST', `/inbound/${sourceId}`, { rawBody: body, headers: communication.headers(sourceSecret, body) });
    expect(callback.status).toBe(200);
    expect(callback.body.status).toBe('accepted');

    const stopped = await stop(run);
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5_000);
  }, 60_000);

  it('on SIGTERM finishes the attempt in flight, records it, and exits 0', async () => {
    let release: () => void = () => undefined;
    const arrived = new Promise<void>((res) => (release = res));
    receiver = await startReceiver((_req, res) => {
      release();
      setTimeout(() => res.writeHead(200).end('ok'), 1_000);
    });
    // Loopback receivers need ALLOW_PRIVATE_TARGETS, as in local development.
    const run = await start({ ALLOW_PRIVATE_TARGETS: 'true' });
    const ep = await request(run.url, 'POST', '/v1/endpoints', { token: tenant.apiKey, body: { url: `${receiver.url}/slow` } });
    expect(ep.status).toBe(201);
    const published = await request(run.url, 'POST', '/v1/events', { token: tenant.apiKey, body: { type: 'order.created', data: {} } });
    expect(published.status).toBe(202);
    await arrived;

    const stopped = await stop(run);
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5_000);
    // Deliveries hold the event as the uuid its TypeID encodes.
    const [delivery] = await pgQuery<{ status: string; attempt_count: number }>(
      'SELECT status, attempt_count FROM deliveries WHERE event_id = $1', [uuidOf('event', published.body.id)], dbName,
    );
    expect(delivery).toEqual({ status: 'succeeded', attempt_count: 1 });
    expect(receiver.requests).toHaveLength(1);
  }, 60_000);

  it('SIGTERM to the PID of `npm start` reaches the platform: it drains, stops listening and exits 0', async () => {
    const run = await start({}, { viaNpm: true });
    const stopped = await stop(run);
    expect(stopped.code).toBe(0);
    expect(stopped.ms).toBeLessThan(5_000);
    expect(run.output()).toContain('shutting down');
    // Nothing left behind listening on the port (an orphaned child would still answer).
    expect(await request(run.url, 'GET', '/healthz').catch(() => 'refused')).toBe('refused');
  }, 60_000);
});
