import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it, vi } from 'vitest';
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

  describe('settingsAsOf', () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it('answers a state read at or after the time asked for, one read per gap shared by every caller waiting', async () => {
      vi.useFakeTimers({ now: 0, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const box = new SecretBox(randomBytes(32));
      let stored: SealedHeaders = { id: 'ep_1', headers_enc: null, released_at: null };
      const readsAt: number[] = [];
      const cache = new EndpointHeaders({ box, asOfGapMs: 250, read: async () => (readsAt.push(Date.now()), stored) });

      await cache.settings('ten_1', 'ep_1');
      expect((await cache.settingsAsOf('ten_1', 'ep_1', 0)).held.releasedAt).toBeNull(); // read at 0: as of 0
      expect(readsAt).toEqual([0]);

      // Resumed at 5: an attempt that started at 10 must see it, though the read at 0 is still fresh.
      stored = { ...stored, released_at: new Date(5) };
      await vi.advanceTimersByTimeAsync(10);
      const first = cache.settingsAsOf('ten_1', 'ep_1', 10);
      await vi.advanceTimersByTimeAsync(100);
      const second = cache.settingsAsOf('ten_1', 'ep_1', 110);
      await vi.advanceTimersByTimeAsync(139);
      expect(readsAt).toEqual([0]); // the next read waits for the gap after the last one

      await vi.advanceTimersByTimeAsync(1);
      expect(readsAt).toEqual([0, 250]); // one read for both callers, started after both asked
      expect((await first).held.releasedAt).toEqual(new Date(5));
      expect((await second).held.releasedAt).toEqual(new Date(5));

      // A read already started at or after the time asked for answers at once.
      expect((await cache.settingsAsOf('ten_1', 'ep_1', 250)).held.releasedAt).toEqual(new Date(5));
      expect(readsAt).toEqual([0, 250]);
    });

    it('shares a read in flight that started late enough, and fails its callers when the read fails', async () => {
      vi.useFakeTimers({ now: 1_000, toFake: ['setTimeout', 'clearTimeout', 'Date'] });
      const box = new SecretBox(randomBytes(32));
      let release: (row: SealedHeaders) => void = () => undefined;
      let reads = 0;
      const cache = new EndpointHeaders({
        box,
        asOfGapMs: 250,
        read: () => {
          reads++;
          if (reads === 2) return Promise.reject(new Error('timeout acquiring a connection'));
          return new Promise<SealedHeaders>((resolve) => (release = resolve));
        },
      });
      const headersRead = cache.settings('ten_1', 'ep_1'); // started at 1,000, still in flight
      const asOf = cache.settingsAsOf('ten_1', 'ep_1', 1_000);
      release({ id: 'ep_1', headers_enc: null, consecutive_failures: 3 });
      expect((await asOf).held.consecutiveFailures).toBe(3);
      await headersRead;
      expect(reads).toBe(1);

      await vi.advanceTimersByTimeAsync(300);
      await expect(cache.settingsAsOf('ten_1', 'ep_1', 1_300)).rejects.toThrow('timeout acquiring a connection');
      expect(reads).toBe(2);
    });
  });
});
