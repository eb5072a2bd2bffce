import { describe, expect, it } from 'vitest';
import { checkTargetUrl, classifyAddress, isLocalhostName, parseHostLiteral } from '../../src/dispatch/address-guard.js';

describe('parseHostLiteral', () => {
  it.each([
    ['127.0.0.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['0X7F000001', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['127.0.1', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['0x7f.0.0.1', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['127.0.0.1.', '127.0.0.1'],
    ['0.0.0.0', '0.0.0.0'],
    ['0', '0.0.0.0'],
    ['0x', '0.0.0.0'],
    ['017700000001', '127.0.0.1'],
    ['169.254.43518', '169.254.169.254'],
    ['%31%32%37.0.0.1', '127.0.0.1'],
    ['127\u30020\u30020\u30021', '127.0.0.1'], // ideographic full stops
    ['[::1]', '::1'],
    ['::1', '::1'],
    ['[::ffff:127.0.0.1]', '::ffff:7f00:1'],
    ['[::ffff:7f00:1]', '::ffff:7f00:1'],
    ['[0:0:0:0:0:0:0:1]', '::1'],
    ['[::]', '::'],
  ])('%s → %s', (input, expected) => expect(parseHostLiteral(input)).toBe(expected));

  it.each(['example.com', 'localhost', '1.2.3.4.5', '256.0.0.1', '08.0.0.1', '4294967296', '', '[fe80::1%eth0]', 'a@127.0.0.1', '1.2.3.4/x', '[::1'])(
    '%s is not a literal',
    (input) => expect(parseHostLiteral(input)).toBeUndefined(),
  );

  it('agrees with the WHATWG URL parser on every IPv4 notation', () => {
    for (const h of ['2130706433', '0x7f000001', '127.1', '0177.0.0.1', '0x7f.1', '017700000001', '10.1', '192.168.257']) {
      expect(parseHostLiteral(h)).toBe(new URL(`http://${h}/`).hostname);
    }
  });
});

describe('classifyAddress', () => {
  it.each([
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['2606:4700::1111', 'public'],
    ['2001:4860:4860::8888', 'public'],
    ['64:ff9b::808:808', 'public'], // NAT64 of 8.8.8.8
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['2130706433', 'loopback'],
    ['0x7f000001', 'loopback'],
    ['0177.0.0.1', 'loopback'],
    ['64:ff9b::7f00:1', 'loopback'], // NAT64 of 127.0.0.1
    ['::ffff:0:7f00:1', 'loopback'], // SIIT (RFC 6145)
    ['2002:7f00:1::', 'loopback'], // 6to4 of 127.0.0.1
    ['::127.0.0.1', 'loopback'], // deprecated IPv4-compatible
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'], // CGNAT
    ['fc00::1', 'private'],
    ['fd12:3456::1', 'private'],
    ['::ffff:10.0.0.1', 'private'],
    ['2002:a00:1::', 'private'], // 6to4 of 10.0.0.1
    ['169.254.169.254', 'link_local'],
    ['::ffff:169.254.169.254', 'link_local'],
    ['fe80::1', 'link_local'],
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['::', 'unspecified'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['192.0.2.1', 'reserved'],
    ['198.18.0.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['2001:db8::1', 'reserved'],
    ['fec0::1', 'reserved'], // deprecated site-local
    ['100::1', 'reserved'], // discard-only
    ['64:ff9b:1::1', 'reserved'], // local-use NAT64: cannot be judged
    ['::8.8.8.8', 'reserved'],
    ['2002:808:808::', 'tunnel'], // 6to4 of a public address
    ['2001::1', 'tunnel'], // Teredo
    ['not-an-ip', 'invalid'],
    ['', 'invalid'],
  ])('%s → %s', (ip, expected) => expect(classifyAddress(ip)).toBe(expected));
});

describe('isLocalhostName', () => {
  it.each([['localhost', true], ['LOCALHOST', true], ['localhost.', true], ['api.localhost', true], ['localhost.example.com', false], ['notlocalhost', false]])(
    '%s → %s',
    (h, expected) => expect(isLocalhostName(h)).toBe(expected),
  );
});

describe('checkTargetUrl', () => {
  const strict = { allowPrivate: false };
  const lax = { allowPrivate: true };

  it('accepts public https URLs and returns the parsed URL', () => {
    const r = checkTargetUrl('https://hooks.example.com/in?x=1', strict);
    expect(r.ok).toBe(true);
    if (r.ok) expect(r.url.hostname).toBe('hooks.example.com');
    expect(checkTargetUrl('https://8.8.8.8/', strict).ok).toBe(true);
    expect(checkTargetUrl('https://[2606:4700::1111]/', strict).ok).toBe(true);
  });

  it.each(['not a url', '/relative/path', 'hooks.example.com/x', '', 'https://', `https://e.com/${'a'.repeat(2100)}`])(
    'invalid_url: %s',
    (u) => expect(checkTargetUrl(u, strict)).toMatchObject({ ok: false, code: 'invalid_url' }),
  );

  it('requires https unless private targets are allowed', () => {
    expect(checkTargetUrl('http://hooks.example.com/', strict)).toMatchObject({ ok: false, code: 'scheme_not_allowed' });
    expect(checkTargetUrl('http://hooks.example.com/', lax).ok).toBe(true);
    for (const u of ['ftp://example.com/', 'file:///etc/passwd', 'javascript:alert(1)', 'gopher://example.com/']) {
      expect(checkTargetUrl(u, lax)).toMatchObject({ ok: false, code: 'scheme_not_allowed' });
    }
  });

  it('refuses credentials in the URL', () => {
    expect(checkTargetUrl('https://user:pw@example.com/', strict)).toMatchObject({ ok: false, code: 'credentials_in_url' });
    expect(checkTargetUrl('https://user@example.com/', lax)).toMatchObject({ ok: false, code: 'credentials_in_url' });
  });

  const privateHosts = [
    '127.0.0.1', '2130706433', '0x7f000001', '127.1', '0177.0.0.1', '0.0.0.0', '0', '[::1]', '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]', '10.0.0.1', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '[fc00::1]',
    '[fe80::1]', '[::]', '224.0.0.1', 'localhost', 'LocalHost.', 'app.localhost', '%31%32%37.0.0.1',
  ];
  it.each(privateHosts)('private_address: https://%s:8443/', (host) => {
    expect(checkTargetUrl(`https://${host}:8443/x`, strict)).toMatchObject({ ok: false, code: 'private_address' });
    expect(checkTargetUrl(`http://${host}:8443/x`, lax).ok).toBe(true);
  });
});
