import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/index.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * A process started with another SECRETS_KEY than the one its database's secrets were sealed with
 * refuses to start, naming the variable, instead of answering every callback 503 as if the
 * database were down.
 */

let first: TestPlatform;

beforeAll(async () => {
  first = await startTestPlatform({ role: 'api' });
  const tenant = await first.createTenant('sealed');
  expect((await tenant.call('POST', '/v1/endpoints', { body: { url: 'https://example.com/hooks' } })).status).toBe(201);
});
afterAll(async () => {
  await first?.stop();
});

describe('SECRETS_KEY at start', () => {
  it('refuses a key that does not open the stored secrets, with a one-line configuration error', async () => {
    const wrongKey = randomBytes(32).toString('base64');
    const started = startTestPlatform({ role: 'api', database: first.database, env: { SECRETS_KEY: wrongKey } });
    await expect(started).rejects.toBeInstanceOf(ConfigError);
    await expect(started).rejects.toThrow(/^invalid configuration: SECRETS_KEY: does not open the secrets stored in this database \(ep_[0-9a-z]+\)/);
  });

  it('starts with the key the secrets were sealed with', async () => {
    const second = await startTestPlatform({ role: 'api', database: first.database, env: { SECRETS_KEY: first.env.SECRETS_KEY! } });
    try {
      expect((await second.call('GET', '/readyz')).status).toBe(200);
    } finally {
      await second.stop();
    }
  });
});
