import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';
import { PROXY_RETRY_DELAY_MS, proxyRetryAt } from '../../src/domain/retry-policy.js';
import { bypassesProxy } from '../../src/outbound/egress-proxy.js';

const base = { ADMIN_TOKEN: 'a'.repeat(24), SECRETS_KEY: Buffer.alloc(32).toString('base64') };
const load = (env: Record<string, string>) => loadConfig({ ...base, ...env });

describe('EGRESS_PROXY_URL', () => {
  it('takes http://[user:pass@]host:port and keeps the credentials for the proxy only', () => {
    expect(load({}).egressProxy).toBeUndefined();
    expect(load({ EGRESS_PROXY_URL: 'http://proxy.internal:3128' }).egressProxy).toEqual({ url: 'http://proxy.internal:3128', noProxy: [] });
    expect(load({ EGRESS_PROXY_URL: 'http://relay:p%40ss@10.0.0.5:8080/', EGRESS_NO_PROXY: 'Example.com, .corp' }).egressProxy).toEqual({
      url: 'http://relay:p%40ss@10.0.0.5:8080',
      noProxy: ['example.com', '.corp'],
    });
  });

  it.each([
    ['not a url', 'must be a URL'],
    ['https://proxy:3128', 'scheme must be http'],
    ['socks5://proxy:1080', 'scheme must be http'],
    ['http://proxy', 'must give a port'],
    ['http://proxy:3128/path', 'must not have a path'],
    ['http://:secret@proxy:3128', 'a password needs a user name'],
  ])('refuses %s with one line naming the variable and not echoing the value', (value, problem) => {
    let error: unknown;
    try {
      load({ EGRESS_PROXY_URL: value });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/^invalid configuration: EGRESS_PROXY_URL: /);
    expect(message).toContain(problem);
    expect(message).not.toContain('secret');
    expect(message).not.toContain('\n');
  });

  it('refuses an EGRESS_NO_PROXY entry that is not a host, domain or address', () => {
    expect(() => load({ EGRESS_NO_PROXY: 'ok.example, http://bad/' })).toThrow(/^invalid configuration: EGRESS_NO_PROXY: .*"http:\/\/bad\/"/);
  });
});

describe('EGRESS_NO_PROXY matching', () => {
  it.each([
    ['example.com', '443', ['example.com'], true],
    ['hooks.example.com', '443', ['example.com'], true],
    ['hooks.example.com', '443', ['.example.com'], true],
    ['hooks.example.com', '443', ['*.example.com'], true],
    ['badexample.com', '443', ['example.com'], false],
    ['example.com.', '443', ['example.com'], true],
    ['anything.test', '80', ['*'], true],
    ['hooks.example.com', '8443', ['example.com:443'], false],
    ['hooks.example.com', '443', ['example.com:443'], true],
    ['10.1.2.3', '80', ['10.1.2.3'], true],
    ['110.1.2.3', '80', ['10.1.2.3'], false],
    ['[::1]', '80', ['::1'], true],
    ['[::1]', '80', ['[::1]:80'], true],
    ['[::1]', '81', ['[::1]:80'], false],
    ['other.org', '443', ['example.com', 'localhost'], false],
  ])('%s:%s with %j bypasses: %s', (host, port, list, expected) => {
    expect(bypassesProxy(host, port, list)).toBe(expected);
  });
});

describe('the retry after a proxy failure', () => {
  it('is within [delay/2, delay] of now, whatever the endpoint policy says', () => {
    const now = new Date('2026-12-01T00:00:00Z');
    for (const r of [0, 0.5, 0.999999, 1, -1, Number.NaN]) {
      const wait = proxyRetryAt(now, () => r).getTime() - now.getTime();
      expect(wait).toBeGreaterThanOrEqual(PROXY_RETRY_DELAY_MS / 2);
      expect(wait).toBeLessThanOrEqual(PROXY_RETRY_DELAY_MS);
    }
  });
});
