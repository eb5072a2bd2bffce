// The log-redaction check against the real thing: `tsx src/main.ts all` as a child process started
// from an empty .env (so it generates ADMIN_TOKEN and SECRETS_KEY and prints the token once, by
// design), at LOG_LEVEL=trace, with all of its stdout and stderr captured: pino's lines, the
// startup banner, and whatever libraries print on their own. The same traffic as the in-process
// test runs against it, PostgreSQL outage included (cut at a TCP proxy), then it is stopped with
// SIGTERM. Apart from that one banner line, no secret may appear anywhere in the output.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { request } from '../helpers/http.js';
import { clearRedisPrefix, eventually, redisUrl } from '../helpers/platform.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { driveLoggedTraffic, secretForms, trafficEnv, type Traffic } from './log-traffic.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tokenLine = /^Generated ADMIN_TOKEN \(kept in \.env\): (\S+)$/gm;

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

describe('log redaction (child process, startup banner included)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'whr-logs-'));
  const envFile = join(dir, '.env');
  const queuePrefix = `tlog${randomBytes(4).toString('hex')}`;
  let database: TestDatabase;
  let proxy: TcpProxy;
  let direct: ReturnType<typeof createDb>;
  let child: ChildProcess;
  let output = '';
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  let traffic: Traffic;
  let adminToken = '';

  beforeAll(async () => {
    database = await createTestDatabase();
    const pg = new URL(database.url);
    proxy = await startTcpProxy({ host: pg.hostname, port: Number(pg.port || 5432) });
    const proxied = new URL(database.url);
    proxied.port = String(proxy.port);
    const port = await freePort();
    const env: Record<string, string> = {};
    for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[name]) env[name] = process.env[name]!;
    Object.assign(env, trafficEnv, {
      PORT: String(port),
      DATABASE_URL: proxied.toString(),
      REDIS_URL: redisUrl,
      QUEUE_PREFIX: queuePrefix,
      ENV_FILE: envFile, // empty: the admin token and the secrets key are generated on this start
      LOG_LEVEL: 'trace',
      ALLOW_PRIVATE_TARGETS: 'true', // the receivers are on loopback
      RETRY_BASE_DELAY_MS: '100',
      RETRY_MAX_DELAY_MS: '1000',
      ATTEMPT_TIMEOUT_MS: '2000',
      CONNECT_TIMEOUT_MS: '1000',
      QUEUED_LEASE_SECONDS: '3',
    });
    child = spawn(join(root, 'node_modules/.bin/tsx'), ['src/main.ts', 'all'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    // 'close', not 'exit': a child's last lines can still be in the pipe when it exits, and under
    // load its shutdown line was read after the test had looked for it.
    const exited = new Promise<void>((res) => child.once('close', (code, signal) => ((exit = { code, signal }), res())));
    const url = `http://127.0.0.1:${port}`;
    await eventually(
      async () => {
        if (exit) throw new Error(`the platform exited early:\n${output}`);
        return (await request(url, 'GET', '/readyz').catch(() => undefined))?.status === 200;
      },
      'the child process is ready',
      60_000,
      100,
    );
    adminToken = [...output.matchAll(tokenLine)][0]?.[1] ?? '';
    expect(adminToken, output).toMatch(/^adm_/);

    direct = createDb({ url: database.url, poolMax: 2 });
    traffic = await driveLoggedTraffic({
      url,
      adminToken,
      db: direct,
      cutStorage: () => proxy.cut('refuse'),
      hangStorage: () => proxy.cut('blackhole'),
      restoreStorage: () => proxy.restore(),
      logs: () => output,
    });
    const secretsKey = /^SECRETS_KEY=(\S+)$/m.exec(readFileSync(envFile, 'utf8'))?.[1];
    expect(secretsKey).toBeTruthy();
    traffic.secrets.set('SECRETS_KEY', secretsKey!);

    child.kill('SIGTERM');
    await exited;
  }, 240_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await traffic?.close();
    await direct?.destroy();
    await proxy?.close();
    await database?.drop();
    await clearRedisPrefix(queuePrefix);
    rmSync(dir, { recursive: true, force: true });
  });

  it('ran, logged the outage and stopped cleanly on SIGTERM', () => {
    expect(output).toContain('"msg":"listening"');
    expect(output).toContain('"msg":"request failed"');
    expect(output).toMatch(/"msg":"reconciliation could not read its work/);
    expect(output).toMatch(/"msg":"shutting down/);
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it('prints the generated admin token exactly once, on its banner line', () => {
    expect([...output.matchAll(tokenLine)]).toHaveLength(1);
    expect(output.split(adminToken)).toHaveLength(2);
  });

  it('prints no secret, key, token or signature anywhere else', () => {
    const rest = output.replace(tokenLine, '<banner>');
    expect(rest).toContain('<banner>');
    expect(traffic.secrets.size).toBeGreaterThan(30);
    const leaks: string[] = [];
    for (const [label, value] of traffic.secrets) {
      for (const form of secretForms(value)) if (rest.includes(form)) leaks.push(`${label}: ${form.slice(0, 12)}…`);
    }
    expect(leaks).toEqual([]);
  });
});
