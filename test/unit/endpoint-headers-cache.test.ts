import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/domain/secret-box.js';
import { EndpointHeaders, type SealedHeaders } from '../../src/outbound/endpoint-headers.js';

describe('EndpointHeaders', () => {
  it('reads an endpoint at most once per freshMs, and a change applies after it', async () => {
    const box = new SecretBox(randomBytes(32));
    let stored: SealedHeaders = { id: 'ep_1', headers_enc: box.seal('{"X-Key":"one"}', 'ep_1') };
    let reads = 0;
    let now = 0;
    const cache = new EndpointHeaders({ box, freshMs: 1000, now: () => now, read: async () => (reads++, stored) });

    expect(await cache.of('ten_1', 'ep_1')).toEqual({ 'X-Key': 'one' });
    now = 999;
    const first = await cache.of('ten_1', 'ep_1');
    expect(reads).toBe(1);

    now = 1000;
    expect(await cache.of('ten_1', 'ep_1')).toBe(first); // read again, same sealed form: the same object, not parsed again
    expect(reads).toBe(2);

    stored = { id: 'ep_1', headers_enc: box.seal('{"X-Key":"two"}', 'ep_1') };
    now = 1500;
    expect(await cache.of('ten_1', 'ep_1')).toEqual({ 'X-Key': 'one' });
    now = 2000;
    expect(await cache.of('ten_1', 'ep_1')).toEqual({ 'X-Key': 'two' });
    stored = { id: 'ep_1', headers_enc: null };
    now = 3000;
    expect(await cache.of('ten_1', 'ep_1')).toEqual({});
  });
});
