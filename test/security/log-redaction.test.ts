// No secret reaches the logs: the platform runs in-process at LOG_LEVEL=trace with every line
// captured, through traffic that makes each logging path fire (see log-traffic.ts), including a
// PostgreSQL outage cut at a TCP proxy. Then not one endpoint secret, source secret, API key (or
// its hash), admin token, SECRETS_KEY, Authorization value or signature value may appear in what
// was logged. The same check against a real child process, startup banner included, is in
// log-redaction-process.test.ts. Secrets in a database dump: test/integration/secrets-at-rest.test.ts.
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';
import { driveLoggedTraffic, secretForms, trafficEnv, type Traffic } from './log-traffic.js';

describe('log redaction (in-process, LOG_LEVEL=trace)', () => {
  let database: TestDatabase;
  let proxy: TcpProxy;
  let t: TestPlatform;
  let direct: ReturnType<typeof createDb>;
  let traffic: Traffic;
  let logs = '';

  beforeAll(async () => {
    database = await createTestDatabase();
    const pg = new URL(database.url);
    proxy = await startTcpProxy({ host: pg.hostname, port: Number(pg.port || 5432) });
    const proxied = new URL(database.url);
    proxied.port = String(proxy.port);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs += chunk.toString();
        done();
      },
    });
    t = await startTestPlatform({
      database,
      logs: sink,
      env: { ...trafficEnv, DATABASE_URL: proxied.toString(), LOG_LEVEL: 'trace' },
    });
    direct = createDb({ url: database.url, poolMax: 2 });
    traffic = await driveLoggedTraffic({
      url: t.url,
      adminToken: t.config.adminToken,
      db: direct,
      cutStorage: () => proxy.cut('refuse'),
      hangStorage: () => proxy.cut('blackhole'),
      restoreStorage: () => proxy.restore(),
      logs: () => logs,
    });
    traffic.secrets.set('SECRETS_KEY', t.env.SECRETS_KEY!);
  }, 240_000);

  afterAll(async () => {
    await traffic?.close();
    await t?.stop();
    await direct?.destroy();
    await proxy?.close();
    await database?.drop();
  });

  it('logged what happened: errors, the outage, at trace level, as JSON lines', () => {
    const lines = logs.split('\n').filter((l) => l.trim() !== '');
    const parsed = lines.map((l) => JSON.parse(l) as { level: number; msg: string });
    const messages = new Set(parsed.map((p) => p.msg));
    // The paths whose output is under test really ran, so "no secret in the logs" is not vacuous.
    expect(messages).toContain('listening');
    expect(messages).toContain('request failed'); // the 503s of the outage, with their errors
    expect([...messages].some((m) => m.startsWith('reconciliation could not read its work'))).toBe(true);
    expect([...messages].some((m) => /^(sweep failed|admission round failed)/.test(m))).toBe(true);
    expect(parsed.some((p) => p.level >= 50)).toBe(true);
    expect(logs).toContain('"err":');
  });

  it('contains no secret, key, token or signature, in any form', () => {
    expect(traffic.secrets.size).toBeGreaterThan(30);
    const leaks: string[] = [];
    for (const [label, value] of traffic.secrets) {
      for (const form of secretForms(value)) if (logs.includes(form)) leaks.push(`${label}: ${form.slice(0, 12)}…`);
    }
    expect(leaks).toEqual([]);
  });
});
