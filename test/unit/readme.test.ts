import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../src/config/env-schema.js';
import { loadConfig } from '../../src/config/index.js';
import { requiredEnv } from '../helpers/config.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  it('opens with the two quick-start command lines', () => {
    const quickStart = readme.split('## Quick start')[1]!.split('```')[1]!;
    expect(quickStart.trim().split('\n').slice(1)).toEqual(['npm ci && npm start', 'npm ci && npm test']);
  });

  it('documents every configuration variable with its real default', () => {
    const table = new Map(
      [...readme.matchAll(/^\| `([A-Z_]+)` \| ([^|]+) \|/gm)].map((m) => [m[1]!, m[2]!.trim().replace(/^`|`$/g, '')]),
    );
    const defaults = envSchema.parse({});
    for (const name of Object.keys(envSchema.shape)) {
      expect(table.has(name), `${name} is missing from the README table`).toBe(true);
      const value = (defaults as Record<string, unknown>)[name];
      if (value !== undefined && name !== 'PUBLIC_BASE_URL') expect(table.get(name), name).toBe(String(value));
    }
    // Its default is another variable's value (src/config/index.ts).
    expect(table.get('DB_POOL_MIN')).toBe('DB_POOL_MAX');
    expect(loadConfig(requiredEnv).dbPoolMin).toBe(loadConfig(requiredEnv).dbPoolMax);
  });

  it('names every runtime dependency and says why', () => {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { dependencies: Record<string, string> };
    for (const name of Object.keys(pkg.dependencies)) expect(readme, name).toContain(name);
  });
});
