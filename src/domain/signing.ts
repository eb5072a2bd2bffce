import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Signature primitives shared by inbound verification and outbound signing.
 * Pure: node:crypto only, no I/O, never reads the clock.
 */

const WHSEC_PREFIX = 'whsec_';

/** Lowercase hex HMAC-SHA256; the secret is used as UTF-8 text, as both Momo contracts require. */
export function hmacSha256Hex(secret: string, data: Buffer | string): string {
  return createHmac('sha256', secret).update(data).digest('hex');
}

/**
 * Constant-time string comparison. timingSafeEqual throws on unequal lengths, so lengths are
 * checked first; the length of a signature is public anyway (it is fixed by the algorithm).
 */
export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'utf8');
  const right = Buffer.from(b, 'utf8');
  if (left.length !== right.length) return false;
  return timingSafeEqual(left, right);
}

/**
 * Constant-time comparison of a received hex digest with the expected one. Hex is case-insensitive
 * (.NET's Convert.ToHexString, for one, emits uppercase), so both are compared as the bytes they
 * encode, never as text. Anything that is not hex of the expected length is simply unequal.
 */
export function hexDigestEqual(received: string, expectedHex: string): boolean {
  if (received.length !== expectedHex.length || received.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(received)) return false;
  return timingSafeEqual(Buffer.from(received, 'hex'), Buffer.from(expectedHex, 'hex'));
}

/** Standard Webhooks secrets are `whsec_` + base64 of the key bytes; the key is the decoded bytes. */
export function decodeWebhookSecret(secret: string): Buffer {
  const encoded = secret.startsWith(WHSEC_PREFIX) ? secret.slice(WHSEC_PREFIX.length) : secret;
  return Buffer.from(encoded, 'base64');
}

function standardSignature(key: Buffer, id: string, timestampSec: number, body: string | Buffer): string {
  // Sign the body's exact bytes; a Buffer is never round-tripped through a string.
  const bodyBytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return createHmac('sha256', key)
    .update(`${id}.${timestampSec}.`, 'utf8')
    .update(bodyBytes)
    .digest('base64');
}

/** Standard Webhooks v1 signature: `v1,<base64 HMAC-SHA256(key, "<id>.<ts>.<body>")>`. */
export function signStandardWebhook(secret: string, id: string, timestampSec: number, body: string | Buffer): string {
  return `v1,${standardSignature(decodeWebhookSecret(secret), id, timestampSec, body)}`;
}

/** The `webhook-signature` header value: one signature per active secret, space-separated (rotation). */
export function signatureHeader(secrets: readonly string[], id: string, timestampSec: number, body: string | Buffer): string {
  return secrets.map((secret) => signStandardWebhook(secret, id, timestampSec, body)).join(' ');
}

/**
 * True when any `v1,` entry of a space-separated signature header matches. Other versions
 * (e.g. `v1a` asymmetric) are skipped, as the spec asks. An empty key is refused: anyone can
 * compute an HMAC with an empty key, so it would authenticate nothing.
 */
export function verifyStandardWebhook(
  secret: string,
  id: string,
  timestampSec: number,
  body: string | Buffer,
  header: string,
): boolean {
  const key = decodeWebhookSecret(secret);
  if (key.length === 0) return false;
  const expected = standardSignature(key, id, timestampSec, body);
  let matched = false;
  for (const entry of header.split(' ')) {
    if (!entry.startsWith('v1,')) continue;
    // No early exit: every candidate is compared, so timing does not reveal which one matched.
    if (constantTimeEqual(entry.slice(3), expected)) matched = true;
  }
  return matched;
}

/** Endpoint/source secret in Standard Webhooks format; the contract asks for 24+ random bytes. */
export function generateWebhookSecret(): string {
  return WHSEC_PREFIX + randomBytes(24).toString('base64');
}

/** A random secret as lowercase hex, for the Momo contracts whose secret is plain UTF-8 text. */
export function generateHexSecret(bytes = 32): string {
  return randomBytes(bytes).toString('hex');
}
