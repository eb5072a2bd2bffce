// SSRF guard: which addresses and URLs the relay may send tenant-controlled requests to.
// Used at registration (checkTargetUrl) and at send time by the HTTP client's connector
// (targetRefusal on every resolved or literal address, so DNS cannot smuggle a private target).
// ALLOW_PRIVATE_TARGETS opens loopback and private ranges for local development; link-local and
// cloud metadata addresses stay closed under every setting: no developer needs to send a webhook
// to an instance's metadata service, and that is where cloud credentials are handed out.
import net from 'node:net';
import ipaddr from 'ipaddr.js';

export type AddressClass =
  | 'public'
  | 'loopback'
  | 'private' // RFC 1918, CGNAT 100.64/10, IPv6 unique-local fc00::/7
  | 'link_local' // 169.254/16 (cloud metadata lives here), fe80::/10
  | 'metadata' // cloud metadata services outside link-local: Alibaba 100.100.100.200, Oracle 192.0.0.192, AWS fd00:ec2::254
  | 'unspecified' // 0/8, :: (connecting to 0.0.0.0 reaches the local host on Linux)
  | 'multicast'
  | 'broadcast'
  | 'reserved' // documentation, benchmarking, 240/4, deprecated IPv6 ranges, anything not global
  | 'tunnel' // 6to4 / Teredo with a public embedded IPv4: deprecated transition tech, refused
  | 'invalid';

const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR('2000::/3');
const NAT64_WELL_KNOWN = ipaddr.IPv6.parseCIDR('64:ff9b::/96');
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');
/** Cloud metadata endpoints that are not in 169.254/16 (link-local is refused as a whole). */
const METADATA_V4 = new Set(['100.100.100.200', '192.0.0.192']);
const METADATA_V6 = new Set(['fd00:ec2::254']);

/** Classes no setting opens: link-local and cloud metadata, in whatever notation they arrive. */
export function alwaysRefused(cls: AddressClass): boolean {
  return cls === 'link_local' || cls === 'metadata';
}

/**
 * Why a connection to an address of this class is refused, or undefined when it may be made. Only
 * 'public' passes by default; ALLOW_PRIVATE_TARGETS also passes the rest except link-local and metadata.
 */
export function targetRefusal(cls: AddressClass, allowPrivate: boolean): string | undefined {
  if (cls === 'public') return undefined;
  if (alwaysRefused(cls)) return `a link-local or cloud metadata address (${cls}), refused under every setting`;
  if (allowPrivate && cls !== 'invalid') return undefined;
  return `a non-public address (${cls})`;
}

/** Classifies an IP address (IPv4 or IPv6, brackets allowed). Only 'public' may be contacted. */
export function classifyAddress(ip: string): AddressClass {
  const literal = parseHostLiteral(ip);
  if (literal === undefined) return 'invalid';
  const addr = ipaddr.parse(literal);
  return addr.kind() === 'ipv4' ? classifyV4(addr as ipaddr.IPv4) : classifyV6(addr as ipaddr.IPv6);
}

function classifyV4(addr: ipaddr.IPv4): AddressClass {
  if (METADATA_V4.has(addr.toString())) return 'metadata';
  switch (addr.range()) {
    case 'unicast':
      return 'public';
    case 'loopback':
      return 'loopback';
    case 'private':
    case 'carrierGradeNat':
      return 'private';
    case 'linkLocal':
      return 'link_local';
    case 'unspecified':
      return 'unspecified';
    case 'multicast':
      return 'multicast';
    case 'broadcast':
      return 'broadcast';
    default:
      return 'reserved';
  }
}

function embeddedV4(addr: ipaddr.IPv6, firstByte: number): ipaddr.IPv4 {
  const b = addr.toByteArray();
  return new ipaddr.IPv4(b.slice(firstByte, firstByte + 4));
}

/**
 * The IPv4 addresses a local-use NAT64 address (64:ff9b:1::/48) may carry: RFC 6052 puts the IPv4
 * at a position that depends on the network's prefix length (/48, /56, /64 or /96, skipping byte 8),
 * which cannot be known from here, so every position is read.
 */
function localNat64Candidates(addr: ipaddr.IPv6): ipaddr.IPv4[] {
  const b = addr.toByteArray();
  return [
    [b[6], b[7], b[9], b[10]],
    [b[7], b[9], b[10], b[11]],
    [b[9], b[10], b[11], b[12]],
    [b[12], b[13], b[14], b[15]],
  ].map((bytes) => new ipaddr.IPv4(bytes as number[]));
}

/** Teredo (2001::/32) carries the server IPv4 in bytes 4-7 and the client IPv4, inverted, in bytes 12-15. */
function teredoCandidates(addr: ipaddr.IPv6): ipaddr.IPv4[] {
  const b = addr.toByteArray();
  return [embeddedV4(addr, 4), new ipaddr.IPv4(b.slice(12, 16).map((x) => x ^ 0xff))];
}

/** A tunnel or translation address that may lead to link-local or metadata is judged by that. */
function worstOf(candidates: ipaddr.IPv4[], otherwise: AddressClass): AddressClass {
  for (const v4 of candidates) {
    const cls = classifyV4(v4);
    if (alwaysRefused(cls)) return cls;
  }
  return otherwise;
}

function classifyV6(addr: ipaddr.IPv6): AddressClass {
  if (METADATA_V6.has(addr.toString())) return 'metadata';
  const range = addr.range();
  switch (range) {
    case 'unspecified':
      return 'unspecified';
    case 'loopback':
      return 'loopback';
    case 'linkLocal':
      return 'link_local';
    case 'uniqueLocal':
      return 'private';
    case 'multicast':
      return 'multicast';
    // Address families that carry an IPv4 address: judge by the IPv4 the packet would reach.
    case 'ipv4Mapped': // ::ffff:a.b.c.d — the kernel connects to a.b.c.d
    case 'rfc6145': // ::ffff:0:a.b.c.d (SIIT)
      return classifyV4(embeddedV4(addr, 12));
    case 'rfc6052': {
      // 64:ff9b::/96 is DNS64/NAT64 and legitimately used by IPv6-only networks to reach public
      // IPv4; the local-use 64:ff9b:1::/48 is site-specific and cannot be judged, so refused.
      if (!addr.match(NAT64_WELL_KNOWN)) return worstOf(localNat64Candidates(addr), 'reserved');
      return classifyV4(embeddedV4(addr, 12));
    }
    case '6to4': {
      const inner = classifyV4(embeddedV4(addr, 2));
      return inner === 'public' ? 'tunnel' : inner;
    }
    case 'teredo':
      return worstOf(teredoCandidates(addr), 'tunnel'); // no legitimate use here
    case 'unicast':
      break;
    default:
      return 'reserved';
  }
  // ipaddr.js calls everything it has no range for 'unicast'; only 2000::/3 is actually allocated
  // as global unicast, so the deprecated IPv4-compatible ::a.b.c.d and the rest of ::/8 etc. fail.
  if (addr.match(IPV4_COMPATIBLE)) {
    const inner = classifyV4(embeddedV4(addr, 12));
    return inner === 'public' ? 'reserved' : inner;
  }
  return addr.match(IPV6_GLOBAL_UNICAST) ? 'public' : 'reserved';
}

/**
 * WHATWG URL IPv4 parser (the same forms inet_aton accepts): 1–4 dot-separated parts, each
 * decimal, 0x-hex or 0-octal; the last part fills the remaining bytes; one trailing dot allowed.
 */
function parseIPv4Loose(host: string): string | undefined {
  const parts = host.split('.');
  if (parts.length > 1 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length < 1 || parts.length > 4) return undefined;
  const nums: number[] = [];
  for (const p of parts) {
    let n: number;
    if (/^0[xX][0-9a-fA-F]*$/.test(p)) n = p.length === 2 ? 0 : parseInt(p.slice(2), 16);
    else if (/^0[0-7]+$/.test(p)) n = parseInt(p.slice(1), 8);
    else if (/^(0|[1-9][0-9]*)$/.test(p)) n = Number(p);
    else return undefined;
    if (!Number.isSafeInteger(n)) return undefined;
    nums.push(n);
  }
  const last = nums.pop() as number;
  if (nums.some((n) => n > 255)) return undefined;
  if (last >= 256 ** (4 - nums.length)) return undefined;
  let value = last;
  nums.forEach((n, i) => (value += n * 256 ** (3 - i)));
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

/**
 * If `host` is an IP literal in any notation a URL parser or inet_aton would accept, returns it
 * canonical (dotted quad, or compressed IPv6 without brackets); otherwise undefined.
 */
export function parseHostLiteral(host: string): string | undefined {
  let h = host.trim();
  if (h === '' || h.length > 255) return undefined;
  if (h.startsWith('[') && h.endsWith(']')) h = h.slice(1, -1);
  if (h.includes(':')) {
    // Zone ids (%eth0) are refused: they only make sense for link-local targets. The URL parser
    // canonicalises first because ipaddr.js reads "::8.8.8.8" as the IPv4-mapped ::ffff:8.8.8.8,
    // while the kernel (and WHATWG) treat it as ::808:808.
    if (!net.isIPv6(h)) return undefined;
    try {
      const canonical = new URL(`http://[${h}]/`).hostname.slice(1, -1);
      return ipaddr.IPv6.isValid(canonical) ? ipaddr.IPv6.parse(canonical).toString() : undefined;
    } catch {
      return undefined;
    }
  }
  const direct = parseIPv4Loose(h);
  if (direct !== undefined) return direct;
  // Percent-encoding and Unicode dots (e.g. "127%2E0.0.1", "127。0。0。1") are undone by the URL
  // host parser, which also canonicalises every IPv4 form; re-check what it produces. Characters
  // that would make the URL parser read something other than a host (userinfo, path) disqualify.
  if (/[/\\@?#\s]/.test(h)) return undefined;
  try {
    const canonical = new URL(`http://${h}/`).hostname;
    if (canonical !== h && net.isIPv4(canonical)) return canonical;
  } catch {
    // not a valid host at all
  }
  return undefined;
}

export type TargetCheck =
  | { ok: true; url: URL }
  | {
      ok: false;
      code: 'invalid_url' | 'scheme_not_allowed' | 'private_address' | 'credentials_in_url';
      message: string;
    };

/** "localhost", "*.localhost" (RFC 6761), with or without the trailing root dot. */
export function isLocalhostName(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  return h === 'localhost' || h.endsWith('.localhost');
}

/** What ALLOW_PRIVATE_TARGETS does, for the messages that a developer trying it locally will meet. */
const PRIVATE_TARGETS_HINT =
  'ALLOW_PRIVATE_TARGETS=true (for local development and tests) lets the server accept http and loopback or private addresses';

/**
 * Registration-time validation of an endpoint URL. Hostnames are only judged here when they are
 * IP literals or localhost; anything else is resolved and checked at send time by the connector.
 * In production only https is accepted, whatever ALLOW_PRIVATE_TARGETS says: that setting opens
 * private addresses, never plain-text delivery of signed payloads.
 */
export function checkTargetUrl(url: string, opts: { allowPrivate: boolean; production?: boolean }): TargetCheck {
  if (typeof url !== 'string' || url.length > 2048) {
    return { ok: false, code: 'invalid_url', message: 'url must be an absolute http(s) URL of at most 2048 characters' };
  }
  let u: URL;
  try {
    u = new URL(url); // throws for relative URLs (no base)
  } catch {
    return { ok: false, code: 'invalid_url', message: 'url must be an absolute http(s) URL' };
  }
  if (u.protocol !== 'https:' && opts.production === true) {
    return { ok: false, code: 'scheme_not_allowed', message: 'url scheme must be https in production (ALLOW_PRIVATE_TARGETS does not change that)' };
  }
  if (u.protocol !== 'https:' && !(u.protocol === 'http:' && opts.allowPrivate)) {
    const message = opts.allowPrivate
      ? 'url scheme must be http or https'
      : `url scheme must be https${u.protocol === 'http:' ? `; ${PRIVATE_TARGETS_HINT}` : ''}`;
    return { ok: false, code: 'scheme_not_allowed', message };
  }
  if (u.username !== '' || u.password !== '') {
    return { ok: false, code: 'credentials_in_url', message: 'url must not contain a username or password' };
  }
  const literal = parseHostLiteral(u.hostname);
  if (literal !== undefined) {
    const cls = classifyAddress(literal);
    if (alwaysRefused(cls)) {
      return { ok: false, code: 'private_address', message: `url points to ${targetRefusal(cls, opts.allowPrivate)!}, ALLOW_PRIVATE_TARGETS included` };
    }
    if (!opts.allowPrivate && cls !== 'public') {
      return { ok: false, code: 'private_address', message: `url points to a non-public address (${cls}); ${PRIVATE_TARGETS_HINT}` };
    }
  } else if (!opts.allowPrivate && isLocalhostName(u.hostname)) {
    return { ok: false, code: 'private_address', message: `url points to localhost; ${PRIVATE_TARGETS_HINT}` };
  }
  return { ok: true, url: u };
}
