import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { parseLsn } from '../../src/infra/read-replica.js';
import { configError, requiredEnv } from '../helpers/config.js';

describe('read replica settings', () => {
  it('is off without DATABASE_READ_URL, and carries the lag limit (default 5 s) with it', () => {
    expect(loadConfig({ ...requiredEnv }).readReplica).toBeUndefined();
    expect(loadConfig({ ...requiredEnv, DATABASE_READ_URL: 'postgres://reader@replica:5433/webhooks' }).readReplica).toEqual({
      url: 'postgres://reader@replica:5433/webhooks',
      maxLagSeconds: 5,
    });
    expect(loadConfig({ ...requiredEnv, DATABASE_READ_URL: 'postgresql://replica/webhooks', READ_REPLICA_MAX_LAG_SECONDS: '30' }).readReplica?.maxLagSeconds).toBe(30);
  });

  it.each([
    [{ DATABASE_READ_URL: 'mysql://replica/webhooks' }, 'DATABASE_READ_URL'],
    [{ DATABASE_READ_URL: 'replica:5433' }, 'DATABASE_READ_URL'],
    [{ READ_REPLICA_MAX_LAG_SECONDS: '0' }, 'READ_REPLICA_MAX_LAG_SECONDS: must be ≥ 1'],
    [{ READ_REPLICA_MAX_LAG_SECONDS: '2.5' }, 'READ_REPLICA_MAX_LAG_SECONDS: must be a whole number'],
  ])('refuses %j, naming the variable', (env, named) => {
    expect(configError(env)).toContain(named);
  });
});

describe('parseLsn', () => {
  it.each([
    ['0/0', 0n],
    ['0/37000000', 0x37000000n],
    ['16/B374D848', (0x16n << 32n) + 0xb374d848n],
    ['FFFFFFFF/FFFFFFFF', (1n << 64n) - 1n],
  ])('%s is %s', (text, value) => {
    expect(parseLsn(text)).toBe(value);
  });

  it('orders positions across the 4 GiB boundary as PostgreSQL does', () => {
    expect(parseLsn('1/0') > parseLsn('0/FFFFFFFF')).toBe(true);
  });
});
