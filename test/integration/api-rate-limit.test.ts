import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

/**
 * The per-tenant request budget (TENANT_RATE_LIMIT_PER_SECOND), kept in Redis and taken by each
 * process in leases of a twentieth: one tenant's burst is cut at its budget with 429 and
 * Retry-After, and another tenant is untouched.
 */

const budget = 40;
let t: TestPlatform;

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api', env: { TENANT_RATE_LIMIT_PER_SECOND: String(budget) } });
});
afterAll(async () => {
  await t?.stop();
});

describe('tenant request budget', () => {
  it('a burst of 120 requests gets its budget and 429s for the rest; another tenant is not affected', async () => {
    const noisy = await t.createTenant('noisy');
    const quiet = await t.createTenant('quiet');
    const [burst, calm] = await Promise.all([
      Promise.all(Array.from({ length: 120 }, () => noisy.call('GET', '/v1/endpoints'))),
      Promise.all(Array.from({ length: 10 }, () => quiet.call('GET', '/v1/endpoints'))),
    ]);
    const ok = burst.filter((r) => r.status === 200).length;
    const refused = burst.filter((r) => r.status === 429);
    expect(ok + refused.length).toBe(120);
    // The whole budget of the window (two windows if the burst straddles a second), never more.
    expect(ok).toBeGreaterThanOrEqual(budget);
    expect(ok).toBeLessThanOrEqual(2 * budget);
    expect(refused.length).toBeGreaterThan(0);
    for (const r of refused) {
      expect(r.body.error.code).toBe('rate_limited');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    }
    expect(calm.every((r) => r.status === 200)).toBe(true);
  });
});
