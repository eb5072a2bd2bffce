import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

/** The two variables loadConfig always requires, with valid values. */
export const requiredEnv = { ADMIN_TOKEN: 'a-admin-token-of-at-least-24-chars', SECRETS_KEY: randomBytes(32).toString('base64') };

/** The ConfigError message loadConfig gives for these variables (on top of the required ones); fails if it accepts them. */
export function configError(env: Record<string, string>): string {
  try {
    loadConfig({ ...requiredEnv, ...env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}
