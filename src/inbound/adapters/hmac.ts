import { createHmac, timingSafeEqual } from 'node:crypto';
import type { InboundAdapter, InboundRequest, VerifyResult } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import type { SourceType } from '../../domain/sources.js';
import { fallbackDedupeKey } from '../../domain/dedupe.js';
import {
  DEFAULT_TYPE_FIELD,
  signedContentParts,
  type HmacAlgorithm,
  type HmacEncoding,
  type HmacSourceConfig,
  type SignedPart,
} from '../../domain/hmac-source.js';
import { generateHexSecret, hexDigestEqual } from '../../domain/signing.js';
import {
  checkTimestamp,
  header,
  parseJsonObject,
  parseKeyedSignatureHeader,
  rawDocument,
  rejected,
  repeatDigestWithHeader,
  requireHeaderField,
  requireString,
  safeParse,
  safeVerify,
  TIMESTAMP_TOLERANCE_SECONDS,
} from './shared.js';

/**
 * One configurable HMAC verifier behind the `hmac` source type and the Stripe, GitHub and Shopify
 * presets. It signs the exact received bytes (the signed content is assembled as bytes, the body
 * never decoded), compares in constant time, and checks the timestamp before spending an HMAC.
 * The secret is used as UTF-8 text, as all three providers do.
 */

/** Where the signature is: a whole header (with an optional prefix), or `t=..,v1=..` entries (Stripe). */
export type SignatureLocation =
  | { header: string; prefix: string }
  | { header: string; timestampKey: string; signatureKey: string };

export interface HmacScheme {
  /** Lower-case header names throughout, as InboundRequest carries them. */
  signature: SignatureLocation;
  algorithm: HmacAlgorithm;
  encoding: HmacEncoding;
  /** A header holding unix seconds; a keyed signature header carries its own timestamp instead. */
  timestampHeader?: string;
  /** 300 s unless the scheme says otherwise. */
  toleranceSeconds?: number;
  signedContent: readonly SignedPart[];
  /** Needed only when signedContent holds `{id}`. */
  idHeader?: string;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function digestEqual(received: string, expected: Buffer, encoding: HmacEncoding): boolean {
  if (encoding === 'hex') return hexDigestEqual(received, expected.toString('hex'));
  if (!BASE64.test(received)) return false;
  const bytes = Buffer.from(received, 'base64');
  // timingSafeEqual needs equal lengths; a digest's length is public (fixed by the algorithm).
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

/** The received signatures and timestamp, or why there are none. */
function readSignature(scheme: HmacScheme, request: InboundRequest): { candidates: string[]; timestamp?: string } | VerifyResult {
  const location = scheme.signature;
  const value = header(request, location.header);
  if (value === undefined) return rejected('missing_signature', `${location.header} header is missing`);
  if ('timestampKey' in location) {
    const parsed = parseKeyedSignatureHeader(value, location.timestampKey, location.signatureKey);
    if (parsed === undefined) {
      return rejected('bad_signature', `${location.header} must be ${location.timestampKey}=<unix seconds>,${location.signatureKey}=<signature>`);
    }
    return { candidates: parsed.signatures, timestamp: parsed.timestamp };
  }
  if (!value.startsWith(location.prefix)) return rejected('bad_signature', `${location.header} must start with "${location.prefix}"`);
  const candidates = [value.slice(location.prefix.length)];
  if (scheme.timestampHeader === undefined) return { candidates };
  const timestamp = header(request, scheme.timestampHeader);
  if (timestamp === undefined) return rejected('missing_signature', `${scheme.timestampHeader} header is missing`);
  return { candidates, timestamp };
}

export function verifyHmac(scheme: HmacScheme, request: InboundRequest, secret: string): VerifyResult {
  const read = readSignature(scheme, request);
  if ('ok' in read) return read;
  if (read.timestamp !== undefined) {
    const time = checkTimestamp(read.timestamp, request.now, scheme.toleranceSeconds ?? TIMESTAMP_TOLERANCE_SECONDS);
    if (!time.ok) return time;
  }
  const id = scheme.idHeader === undefined ? undefined : header(request, scheme.idHeader);
  if (scheme.signedContent.some((part) => 'placeholder' in part && part.placeholder === 'id') && id === undefined) {
    return rejected('missing_signature', `${scheme.idHeader} header is missing`);
  }
  if (secret === '') return rejected('bad_signature', 'source has no signing secret');

  // The timestamp is signed as it was sent: the sender signed its own text, not our reading of it.
  const signed = Buffer.concat(
    scheme.signedContent.map((part) => {
      if ('text' in part) return Buffer.from(part.text, 'utf8');
      if (part.placeholder === 'body') return request.rawBody;
      return Buffer.from((part.placeholder === 'timestamp' ? read.timestamp : id) ?? '', 'utf8');
    }),
  );
  const expected = createHmac(scheme.algorithm, secret).update(signed).digest();
  let matched = false;
  for (const candidate of read.candidates) {
    // No early exit: every candidate is compared, so timing does not tell which one matched.
    if (digestEqual(candidate, expected, scheme.encoding)) matched = true;
  }
  return matched ? { ok: true } : rejected('bad_signature', `no signature in ${scheme.signature.header} matches the body`);
}

/** A provider whose calls are verified by verifyHmac: the scheme plus how its body maps to an event. */
export function hmacAdapter(options: {
  type: SourceType;
  scheme: HmacScheme;
  parse: (request: InboundRequest) => ParsedEvent;
  /** A header that tells two events with equal bodies apart (the event id); see repeatDigestWithHeader. */
  identityHeader?: string;
}): InboundAdapter {
  const { identityHeader } = options;
  return {
    type: options.type,
    verify: (request, secret) => safeVerify(() => verifyHmac(options.scheme, request, secret)),
    parse: (request) => safeParse(() => options.parse(request)),
    ...(identityHeader !== undefined && { repeatDigest: (request: InboundRequest) => repeatDigestWithHeader(request, identityHeader) }),
    generateSecret: () => generateHexSecret(),
  };
}

const lower = (name: string | undefined) => name?.toLowerCase();

/** The scheme a tenant's `hmac` configuration describes. */
export function schemeOf(config: HmacSourceConfig): HmacScheme {
  const timestampHeader = lower(config.timestampHeader);
  const idHeader = lower(config.idHeader);
  return {
    signature: { header: config.header.toLowerCase(), prefix: config.prefix ?? '' },
    algorithm: config.algorithm,
    encoding: config.encoding,
    ...(timestampHeader !== undefined && { timestampHeader }),
    ...(config.toleranceSeconds !== undefined && { toleranceSeconds: config.toleranceSeconds }),
    signedContent: signedContentParts(config.signedContent),
    ...(idHeader !== undefined && { idHeader }),
  };
}

/**
 * A generic `hmac` source. The event id is the idHeader when configured (the inbox key, as
 * webhook-id is for Standard Webhooks); without one, an event is its type and JSON content, so only
 * a repeat of both is a duplicate. The whole body is forwarded as `data`.
 */
export function configuredHmac(config: HmacSourceConfig): InboundAdapter {
  const idHeader = lower(config.idHeader);
  const typeHeader = lower(config.typeHeader);
  const typeField = config.typeField ?? DEFAULT_TYPE_FIELD;
  // Without an id, a type header still tells two events with equal bodies apart.
  const identityHeader = idHeader ?? typeHeader;
  return hmacAdapter({
    type: 'hmac',
    scheme: schemeOf(config),
    ...(identityHeader !== undefined && { identityHeader }),
    parse: (request) => {
      const id = idHeader === undefined ? undefined : requireHeaderField(request, idHeader);
      const json = parseJsonObject(request.rawBody);
      const type = typeHeader === undefined ? requireString(json.value, typeField) : requireHeaderField(request, typeHeader);
      return { type, dedupeKey: id ?? fallbackDedupeKey({ type, body: json.value }, []), data: rawDocument(json) };
    },
  });
}

/** The `hmac` type before it has a configuration (the registry's entry): verifies nothing. */
export const unconfiguredHmac: InboundAdapter = {
  type: 'hmac',
  verify: () => rejected('bad_signature', 'source has no hmac configuration'),
  parse: () => ({ ok: false, code: 'invalid_field', message: 'source has no hmac configuration' }),
  generateSecret: () => generateHexSecret(),
};
