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

  it('carries the TLS settings with a version that changes when they are sealed anew', async () => {
    const box = new SecretBox(randomBytes(32));
    const tls = { clientCertificate: 'CERT', clientKey: 'KEY' };
    let stored: SealedHeaders = { id: 'ep_1', headers_enc: null, tls_enc: box.seal(JSON.stringify(tls), 'ep_1') };
    let now = 0;
    const cache = new EndpointHeaders({ box, freshMs: 1000, now: () => now, read: async () => stored });

    const first = await cache.settings('ten_1', 'ep_1');
    expect(first).toMatchObject({ headers: {}, tls: { config: tls } });
    now = 1000;
    expect((await cache.settings('ten_1', 'ep_1')).tls).toBe(first.tls); // unchanged: same object, same version
    stored = { ...stored, tls_enc: box.seal(JSON.stringify(tls), 'ep_1') };
    now = 2000;
    const resealed = await cache.settings('ten_1', 'ep_1');
    expect(resealed.tls?.version).not.toBe(first.tls?.version);
    stored = { ...stored, tls_enc: null };
    now = 3000;
    expect((await cache.settings('ten_1', 'ep_1')).tls).toBeNull();
  });
});
