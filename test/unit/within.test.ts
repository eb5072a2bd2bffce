import { describe, expect, it } from 'vitest';
import { within } from '../../src/infra/within.js';

describe('within', () => {
  it("answers the work's value when it settles in time", async () => {
    await expect(within(1_000, Promise.resolve(7))).resolves.toBe(7);
  });

  it("passes the work's own rejection on", async () => {
    await expect(within(1_000, Promise.reject(new Error('boom')))).rejects.toThrow('boom');
  });

  it('rejects, naming the work, once the time has passed', async () => {
    const never = new Promise<number>(() => undefined);
    await expect(within(20, never, 'the probe')).rejects.toThrow('the probe timed out after 20 ms');
  });
});
