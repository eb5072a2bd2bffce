import { describe, expect, it } from 'vitest';
import { endpointHeaderProblems, isPlatformHeader, maskEndpointHeaders } from '../../src/domain/endpoint-headers.js';

describe('endpoint headers', () => {
  const refused: Array<[string, Record<string, unknown>, Array<[string, RegExp]>]> = [
    ['a webhook-* name, any case', { 'Webhook-Id': 'x', 'WEBHOOK-SIGNATURE': 'y' }, [['headers.Webhook-Id', /set by the platform/], ['headers.WEBHOOK-SIGNATURE', /set by the platform/]]],
    ['content-type', { 'Content-Type': 'text/plain' }, [['headers.Content-Type', /set by the platform/]]],
    ['content-length', { 'content-length': '1' }, [['headers.content-length', /set by the platform/]]],
    ['host', { Host: 'evil.example' }, [['headers.Host', /set by the platform/]]],
    ['trace context', { traceparent: 'x', TraceState: 'y' }, [['headers.traceparent', /platform/], ['headers.TraceState', /platform/]]],
    ['user-agent', { 'User-Agent': 'me' }, [['headers.User-Agent', /platform/]]],
    ['hop-by-hop', { Connection: 'close', 'Transfer-Encoding': 'chunked', TE: 'x', Upgrade: 'h2c', 'Keep-Alive': '1', Trailer: 'x', 'Proxy-Authorization': 'x', 'Proxy-Authenticate': 'x' },
      ['Connection', 'Transfer-Encoding', 'TE', 'Upgrade', 'Keep-Alive', 'Trailer', 'Proxy-Authorization', 'Proxy-Authenticate'].map((n) => [`headers.${n}`, /platform/] as [string, RegExp])],
    ['a name that is not a token', { 'X Key': 'v', 'X:Y': 'v', '': 'v' }, [['headers.X Key', /letters, digits/], ['headers.X:Y', /letters, digits/], ['headers.', /letters, digits/]]],
    ['the same name in two cases', { 'X-Key': 'a', 'x-key': 'b' }, [['headers.x-key', /same header as X-Key/]]],
    ['CR, LF or NUL in a value', { 'X-A': 'a\r\nInjected: 1', 'X-B': 'b\u0000', 'X-C': 'c\n' }, [['headers.X-A', /control/], ['headers.X-B', /control/], ['headers.X-C', /control/]]],
    ['a character beyond Latin-1', { 'X-A': 'emoji 😀' }, [['headers.X-A', /Latin-1/]]],
    ['a value over 1024 bytes', { 'X-A': 'a'.repeat(1025), 'X-B': 'é'.repeat(513) }, [['headers.X-A', /1024 bytes/], ['headers.X-B', /1024 bytes/]]],
    ['a value that is not a string', { 'X-A': 5, 'X-B': null }, [['headers.X-A', /string/], ['headers.X-B', /string/]]],
    ['more than 20', Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])), [['headers', /at most 20/]]],
  ];
  it.each(refused)('refuses %s, naming each', (_, headers, expected) => {
    const problems = endpointHeaderProblems(headers);
    expect(problems.map((p) => p.path)).toEqual(expected.map(([path]) => path));
    problems.forEach((p, i) => expect(p.message).toMatch(expected[i]![1]));
  });

  const accepted: Array<[string, Record<string, string>]> = [
    ['none', {}],
    ['typical ones', { 'X-Api-Key': 'k_123', Authorization: 'Bearer abc', 'X-Tenant': 'acme' }],
    ['names that only start like platform ones', { 'X-Webhook-Id': 'a', 'Hostname': 'b', 'Content-Typo': 'c', Webhook: 'd' }],
    ['a value of exactly 1024 bytes, tabs and Latin-1', { 'X-A': 'a'.repeat(1024), 'X-B': 'a\tb', 'X-C': 'café', 'X-D': '' }],
    ['twenty', Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`X-H${i}`, 'v']))],
  ];
  it.each(accepted)('accepts %s', (_, headers) => {
    expect(endpointHeaderProblems(headers)).toEqual([]);
  });

  it('tells platform names from the endpoint\'s own, in any case', () => {
    expect(['webhook-id', 'Webhook-Anything', 'HOST', 'Content-Length', 'te'].every(isPlatformHeader)).toBe(true);
    expect(['X-Webhook-Id', 'Authorization', 'tea', 'hosts'].some(isPlatformHeader)).toBe(false);
  });

  it('masks every value, keeping the names', () => {
    expect(maskEndpointHeaders({ 'X-Api-Key': 'secret-value', Authorization: 'Bearer x' })).toEqual({ 'X-Api-Key': '••••', Authorization: '••••' });
  });
});
