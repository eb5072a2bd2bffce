import { describe, expect, it } from 'vitest';
import { checkTargetUrl, classifyAddress, isLocalhostName, parseHostLiteral, targetRefusal } from '../../src/outbound/address-guard.js';

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
    ['127.000.000.001', '127.0.0.1'], // zero-padded parts are octal, and 000/001 mean 0/1
    ['127.0.0.2', '127.0.0.2'],
    // Private ranges hide behind the same notations as loopback.
    ['10.1', '10.0.0.1'],
    ['012.0.0.1', '10.0.0.1'],
    ['0xa000001', '10.0.0.1'],
    ['3232235777', '192.168.1.1'],
    ['0xa9fea9fe', '169.254.169.254'],
    ['0251.0376.0251.0376', '169.254.169.254'],
    ['[fc00:0:0:0:0:0:0:1]', 'fc00::1'],
    ['[FE80::1]', 'fe80::1'],
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
    ['100.100.100.200', 'metadata'], // Alibaba Cloud
    ['192.0.0.192', 'metadata'], // Oracle Cloud
    ['fd00:ec2::254', 'metadata'], // AWS over IPv6
    ['fd00:ec2:0:0:0:0:0:254', 'metadata'],
    ['::ffff:100.100.100.200', 'metadata'],
    ['64:ff9b::6464:64c8', 'metadata'],
    ['2002:6464:64c8::', 'metadata'],
    ['::100.100.100.200', 'metadata'],
    ['not-an-ip', 'invalid'],
    ['', 'invalid'],
  ])('%s → %s', (ip, expected) => expect(classifyAddress(ip)).toBe(expected));

  // The edges of every non-public range, from both sides: an off-by-one in a prefix length would
  // either open a private address or close a public one. Nothing here is ever contacted.
  it.each([
    // 127/8
    ['126.255.255.255', 'public'],
    ['127.0.0.0', 'loopback'],
    ['127.0.0.2', 'loopback'],
    ['128.0.0.0', 'public'],
    // 10/8
    ['9.255.255.255', 'public'],
    ['10.0.0.0', 'private'],
    ['10.255.255.255', 'private'],
    ['11.0.0.0', 'public'],
    // 172.16/12
    ['172.15.255.255', 'public'],
    ['172.16.0.0', 'private'],
    ['172.20.1.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.0', 'public'],
    // 192.168/16
    ['192.167.255.255', 'public'],
    ['192.168.0.0', 'private'],
    ['192.168.255.255', 'private'],
    ['192.169.0.0', 'public'],
    // 169.254/16 (cloud metadata)
    ['169.253.255.255', 'public'],
    ['169.254.0.0', 'link_local'],
    ['169.254.255.255', 'link_local'],
    ['169.255.0.0', 'public'],
    // 100.64/10 (CGNAT)
    ['100.63.255.255', 'public'],
    ['100.64.0.0', 'private'],
    ['100.127.255.255', 'private'],
    ['100.128.0.0', 'public'],
    // fc00::/7 (unique local): fc00:: through fdff:...; fbff:: and fe00:: are outside it
    ['fc00::', 'private'],
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'private'],
    ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
    ['fe00::', 'reserved'],
    // fe80::/10 (link local): fe80:: through febf:...; fec0:: is the deprecated site-local
    ['fe80::', 'link_local'],
    ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link_local'],
    ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
    ['fec0::', 'reserved'],
    // IPv4-mapped, NAT64 and 6to4 forms of each private range are judged by the IPv4 inside
    ['::ffff:172.16.0.1', 'private'],
    ['::ffff:192.168.0.1', 'private'],
    ['::ffff:100.64.0.1', 'private'],
    ['::ffff:a9fe:a9fe', 'link_local'],
    ['64:ff9b::a9fe:a9fe', 'link_local'],
    ['64:ff9b::c0a8:101', 'private'],
    ['2002:c0a8:101::', 'private'],
    ['2002:a9fe:a9fe::', 'link_local'],
    // Loose IPv4 notations of private ranges
    ['10.1', 'private'],
    ['0xa000001', 'private'],
    ['3232235777', 'private'],
    ['0251.0376.0251.0376', 'link_local'],
  ])('range edge %s → %s', (ip, expected) => expect(classifyAddress(ip)).toBe(expected));
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
  it('requires https in production even with private targets allowed', () => {
    const production = { allowPrivate: true, production: true };
    expect(checkTargetUrl('http://hooks.example.com/', production)).toMatchObject({ ok: false, code: 'scheme_not_allowed', message: expect.stringContaining('https in production') });
    expect(checkTargetUrl('http://10.0.0.5:8080/', production)).toMatchObject({ ok: false, code: 'scheme_not_allowed' });
    expect(checkTargetUrl('https://10.0.0.5:8443/', production).ok).toBe(true);
  });

  it('names ALLOW_PRIVATE_TARGETS and what it does when refusing http or a private address', () => {
    const http = checkTargetUrl('http://127.0.0.1:8080/hook', strict);
    expect(http).toMatchObject({ ok: false, code: 'scheme_not_allowed', message: expect.stringMatching(/ALLOW_PRIVATE_TARGETS=true .*http and loopback or private addresses/) });
    const loopback = checkTargetUrl('https://127.0.0.1:8443/hook', strict);
    expect(loopback).toMatchObject({ ok: false, code: 'private_address', message: expect.stringMatching(/\(loopback\); ALLOW_PRIVATE_TARGETS=true/) });
    expect(checkTargetUrl('https://localhost/hook', strict)).toMatchObject({ ok: false, message: expect.stringContaining('ALLOW_PRIVATE_TARGETS') });
    // ftp is not something the setting would allow, so it is not offered as the way out.
    expect(checkTargetUrl('ftp://example.com/', strict)).toMatchObject({ ok: false, code: 'scheme_not_allowed', message: 'url scheme must be https' });
  });

  it('refuses credentials in the URL', () => {
    expect(checkTargetUrl('https://user:pw@example.com/', strict)).toMatchObject({ ok: false, code: 'credentials_in_url' });
    expect(checkTargetUrl('https://user@example.com/', lax)).toMatchObject({ ok: false, code: 'credentials_in_url' });
  });

  // Link-local and cloud metadata, in every notation that reaches them: refused with and without
  // ALLOW_PRIVATE_TARGETS. Nothing here is ever contacted.
  const metadataHosts = [
    '169.254.169.254', '2852039166', '0xA9FEA9FE', '0xa9.0xfe.0xa9.0xfe', '0251.0376.0251.0376', '169.254.43518', '169.254.0.1',
    '169.254.170.2', '%31%36%39.254.169.254', '[::ffff:169.254.169.254]', '[::ffff:a9fe:a9fe]', '[64:ff9b::a9fe:a9fe]',
    '[64:ff9b::169.254.169.254]', '[2002:a9fe:a9fe::]', '[::a9fe:a9fe]', '[::169.254.169.254]', '[::ffff:0:a9fe:a9fe]',
    '[64:ff9b:1::a9fe:a9fe]', '[64:ff9b:1:0:a9:fea9:fe00:0]', '[2001:0:4136:e378:8000:63bf:5601:5601]', '[fe80::1]',
    '[fe80::a9fe:a9fe]', '[febf:ffff::1]', '[fd00:ec2::254]', '100.100.100.200', '1684301000', '[::ffff:6464:64c8]',
    '192.0.0.192',
  ];
  it.each(metadataHosts)('never allowed: %s', (host) => {
    for (const scheme of ['http', 'https']) {
      const lax = checkTargetUrl(`${scheme}://${host}/latest/meta-data/`, { allowPrivate: true });
      expect(lax).toMatchObject({ ok: false, code: 'private_address', message: expect.stringMatching(/link-local or cloud metadata .*ALLOW_PRIVATE_TARGETS included/) });
    }
    expect(checkTargetUrl(`https://${host}/`, strict)).toMatchObject({ ok: false, code: 'private_address' });
    const address = parseHostLiteral(new URL(`http://${host}/`).hostname)!;
    expect(targetRefusal(classifyAddress(address), true)).toMatch(/refused under every setting/);
    expect(targetRefusal(classifyAddress(address), false)).toMatch(/refused under every setting/);
  });

  it('targetRefusal: public always passes, private only with ALLOW_PRIVATE_TARGETS, invalid never', () => {
    expect(targetRefusal('public', false)).toBeUndefined();
    for (const cls of ['loopback', 'private', 'unspecified', 'reserved', 'tunnel'] as const) {
      expect(targetRefusal(cls, true)).toBeUndefined();
      expect(targetRefusal(cls, false)).toBe(`a non-public address (${cls})`);
    }
    expect(targetRefusal('invalid', true)).toBeDefined();
    expect(targetRefusal(classifyAddress('100.64.0.1'), true)).toBeUndefined(); // CGNAT, but not Alibaba's metadata address
    expect(targetRefusal(classifyAddress('fd00:ec2::253'), true)).toBeUndefined(); // unique-local, not the metadata address
  });

  const privateHosts = [
    '127.0.0.1', '2130706433', '0x7f000001', '127.1', '0177.0.0.1', '0.0.0.0', '0', '[::1]', '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]', '10.0.0.1', '172.16.0.1', '192.168.1.1', '100.64.0.1', '[fc00::1]',
    '[::]', '224.0.0.1', 'localhost', 'LocalHost.', 'app.localhost', '%31%32%37.0.0.1',
    // The loopback notations the live SSRF suite (test/security/ssrf.test.ts) sends for real.
    '127.0.0.2', '[0:0:0:0:0:0:0:1]', '127.000.000.001', '0x7f.1', 'localhost.', 'foo.localhost',
    // Private ranges, never contacted by any test.
    '10.255.255.255', '172.31.255.255', '192.168.255.255', '100.127.255.255', '[fd00::1]', '[::ffff:10.0.0.1]', '3232235777', '10.1',
  ];
  it.each(privateHosts)('private_address: https://%s:8443/', (host) => {
    expect(checkTargetUrl(`https://${host}:8443/x`, strict)).toMatchObject({ ok: false, code: 'private_address' });
    expect(checkTargetUrl(`http://${host}:8443/x`, lax).ok).toBe(true);
  });
});
