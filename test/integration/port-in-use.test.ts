import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import type { AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { clearRedisPrefix, redisUrl } from '../helpers/platform.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const tsxCli = join(root, 'node_modules/tsx/dist/cli.mjs');

/** A port already in use is told in one line naming PORT, not as Node's EADDRINUSE stack. */
describe('starting on a port that is already in use', () => {
  let database: TestDatabase;
  let occupant: Server;
  const queuePrefix = `tport${randomBytes(4).toString('hex')}`;

  beforeAll(async () => {
    database = await createTestDatabase();
    occupant = createServer();
    occupant.listen(0, '0.0.0.0');
    await once(occupant, 'listening');
  });
  afterAll(async () => {
    occupant?.close();
    await database?.drop();
    await clearRedisPrefix(queuePrefix);
  });

  it.each(['api', 'all'])('`main.ts %s` prints one line naming PORT and exits non-zero', async (role) => {
    const port = (occupant.address() as AddressInfo).port;
    const env: Record<string, string> = {};
    for (const name of ['PATH', 'HOME', 'TMPDIR', 'LANG']) if (process.env[name]) env[name] = process.env[name]!;
    Object.assign(env, {
      PORT: String(port),
      DATABASE_URL: database.url,
      REDIS_URL: redisUrl,
      ADMIN_TOKEN: 'test-admin-token-0123456789abcdef',
      SECRETS_KEY: randomBytes(32).toString('base64'),
      QUEUE_PREFIX: queuePrefix,
    });
    const child = spawn(process.execPath, [tsxCli, 'src/main.ts', role], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => (stdout += b.toString()));
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const [code] = (await once(child, 'exit')) as [number | null];

    // At the default log level: that one line on stderr, and no EADDRINUSE or stack anywhere
    // (stdout holds only the ordinary log lines of what started before the port was tried).
    expect({ code, stderr }).toEqual({ code: 1, stderr: `error: PORT ${port} is already in use by another process; stop it, or set PORT to a free port\n` });
    expect(stdout).not.toMatch(/EADDRINUSE|address already in use|\bat .+:\d+:\d+/);
    for (const line of stdout.split('\n').filter(Boolean)) expect(JSON.parse(line).level, line).toBeLessThan(50);
  }, 60_000);
});
