import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ensureLocalSecrets } from '../../src/config/dotenv.js';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { configError, requiredEnv } from '../helpers/config.js';

const required = requiredEnv;

describe('loadConfig', () => {
  it("uses the contract's defaults when nothing is set", () => {
    const config = loadConfig({ ...required });
    expect(config).toMatchObject({
      nodeEnv: 'development',
      port: 3000,
      databaseUrl: 'postgres://postgres@127.0.0.1:5432/webhooks',
      redisUrl: 'redis://127.0.0.1:6379',
      allowPrivateTargets: false,
      publicBaseUrl: 'http://localhost:3000',
      reconcileIntervalSeconds: 60,
      maxBodyBytes: 1024 * 1024,
    });
    expect(config.secretsKey).toEqual(Buffer.from(required.SECRETS_KEY, 'base64'));
  });

  it('reads valid values', () => {
    const config = loadConfig({ ...required, PORT: '8080', ALLOW_PRIVATE_TARGETS: 'true', PUBLIC_BASE_URL: 'https://hooks.example.com/', RETRY_MAX_ATTEMPTS: '5' });
    expect(config).toMatchObject({ port: 8080, allowPrivateTargets: true, publicBaseUrl: 'https://hooks.example.com', retry: { maxAttempts: 5 } });
    expect(loadConfig({ ...required, ALLOW_PRIVATE_TARGETS: 'false' }).allowPrivateTargets).toBe(false);
    expect(loadConfig({ ...required, ALLOW_PRIVATE_TARGETS: '1' }).allowPrivateTargets).toBe(true);
  });

  // A bad value must stop the process, never quietly become the default.
  it.each([
    ['PORT', 'abc'],
    ['PORT', '3000abc'],
    ['PORT', '70000'],
    ['PORT', '-1'],
    ['PORT', '80.5'],
    ['DATABASE_URL', 'mysql://x'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'http://127.0.0.1:6379'],
    ['SECRETS_KEY', 'short'],
    ['SECRETS_KEY', randomBytes(32).toString('hex')],
    ['ADMIN_TOKEN', 'short'],
    ['ALLOW_PRIVATE_TARGETS', 'maybe'],
    ['ALLOW_PRIVATE_TARGETS', 'yes'],
    ['NODE_ENV', 'prod'],
    ['LOG_LEVEL', 'verbose'],
    ['PUBLIC_BASE_URL', 'nope'],
    ['PUBLIC_BASE_URL', 'ftp://files.example.com'],
    ['RETRY_MAX_ATTEMPTS', '0'],
    ['ATTEMPT_TIMEOUT_MS', '5s'],
    ['RECONCILE_INTERVAL_SECONDS', 'often'],
  ])('refuses %s=%s with one line naming the variable', (name, value) => {
    const message = configError({ [name]: value });
    expect(message).toMatch(new RegExp(`\\b${name}\\b`));
    expect(message).not.toContain('\n');
    // The message names the offending variable, not some other one.
    for (const other of ['PORT', 'DATABASE_URL', 'SECRETS_KEY', 'ALLOW_PRIVATE_TARGETS']) {
      if (other !== name) expect(message).not.toMatch(new RegExp(`\\b${other}\\b`));
    }
  });

  it.each([
    ['RETRY_MAX_ATTEMPTS', '-1', 'must be ≥ 1'],
    ['RETRY_MAX_ATTEMPTS', '0', 'must be ≥ 1'],
    ['RETRY_MAX_ATTEMPTS', '101', 'must be ≤ 100'],
    ['PORT', '-1', 'must be ≥ 0'],
    ['PORT', '70000', 'must be ≤ 65535'],
    ['ATTEMPT_TIMEOUT_MS', '-5000', 'must be ≥ 100'],
    ['RETRY_MAX_ATTEMPTS', 'three', 'must be a whole number'],
    ['RETRY_MAX_ATTEMPTS', '1.5', 'must be a whole number'],
    ['RETRY_MAX_ATTEMPTS', '-1.5', 'must be a whole number'],
  ])('%s=%s: "%s"', (name, value, says) => {
    expect(configError({ [name]: value })).toBe(`invalid configuration: ${name}: ${says}`);
  });

  it('requires ADMIN_TOKEN and SECRETS_KEY once local generation has had its chance', () => {
    expect(() => loadConfig({ SECRETS_KEY: required.SECRETS_KEY })).toThrow(/ADMIN_TOKEN/);
    expect(() => loadConfig({ ADMIN_TOKEN: required.ADMIN_TOKEN })).toThrow(/SECRETS_KEY/);
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(ConfigError);
  });
});

describe('ensureLocalSecrets (.env for a fresh clone)', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const tempEnvFile = () => {
    const dir = mkdtempSync(join(tmpdir(), 'whr-dotenv-'));
    dirs.push(dir);
    return join(dir, '.env');
  };

  it('generates ADMIN_TOKEN and SECRETS_KEY once, keeps them in .env, and reuses them on the next start', () => {
    const file = tempEnvFile();
    const first: NodeJS.ProcessEnv = {};
    const { generatedAdminToken } = ensureLocalSecrets(first, file);
    expect(generatedAdminToken).toEqual(expect.any(String));
    expect(first.ADMIN_TOKEN).toBe(generatedAdminToken);
    // What was generated is valid configuration.
    const config = loadConfig(first);
    expect(config.adminToken).toBe(generatedAdminToken);
    expect(config.secretsKey).toHaveLength(32);

    const text = readFileSync(file, 'utf8');
    expect(text).toContain(`ADMIN_TOKEN=${first.ADMIN_TOKEN}`);
    expect(text).toContain(`SECRETS_KEY=${first.SECRETS_KEY}`);
    expect(statSync(file).mode & 0o077).toBe(0); // readable by its owner only

    const second: NodeJS.ProcessEnv = {};
    expect(ensureLocalSecrets(second, file)).toEqual({});
    expect(second.ADMIN_TOKEN).toBe(first.ADMIN_TOKEN);
    expect(second.SECRETS_KEY).toBe(first.SECRETS_KEY);
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('never overrides a variable set in the environment, and generates only what is missing', () => {
    const file = tempEnvFile();
    const env: NodeJS.ProcessEnv = { ADMIN_TOKEN: required.ADMIN_TOKEN };
    expect(ensureLocalSecrets(env, file)).toEqual({});
    expect(env.ADMIN_TOKEN).toBe(required.ADMIN_TOKEN);
    expect(readFileSync(file, 'utf8')).not.toContain('ADMIN_TOKEN');
    expect(env.SECRETS_KEY).toEqual(expect.any(String));

    const fromFile = readFileSync(file, 'utf8');
    const overridden: NodeJS.ProcessEnv = { SECRETS_KEY: required.SECRETS_KEY };
    ensureLocalSecrets(overridden, file);
    expect(overridden.SECRETS_KEY).toBe(required.SECRETS_KEY);
    expect(readFileSync(file, 'utf8').startsWith(fromFile)).toBe(true);
  });

  it('keeps what the .env already holds and fills in empty placeholders instead of regenerating every start', () => {
    const file = tempEnvFile();
    writeFileSync(file, '# mine\nLOG_LEVEL=debug\nADMIN_TOKEN=\nSECRETS_KEY=""\n');
    const first: NodeJS.ProcessEnv = {};
    const { generatedAdminToken } = ensureLocalSecrets(first, file);
    expect(generatedAdminToken).toEqual(expect.any(String));
    expect(first.LOG_LEVEL).toBe('debug');
    const text = readFileSync(file, 'utf8');
    expect(text).toContain('# mine\nLOG_LEVEL=debug\n');

    const second: NodeJS.ProcessEnv = {};
    expect(ensureLocalSecrets(second, file)).toEqual({});
    expect(second.ADMIN_TOKEN).toBe(generatedAdminToken);
    expect(second.SECRETS_KEY).toBe(first.SECRETS_KEY);
    expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it('does nothing in production: both secrets must be given', () => {
    const file = tempEnvFile();
    const env: NodeJS.ProcessEnv = { NODE_ENV: 'production' };
    expect(ensureLocalSecrets(env, file)).toEqual({});
    expect(existsSync(file)).toBe(false);
    expect(env.ADMIN_TOKEN).toBeUndefined();
    expect(env.SECRETS_KEY).toBeUndefined();
    expect(() => loadConfig(env)).toThrow(/ADMIN_TOKEN/);
  });
});
