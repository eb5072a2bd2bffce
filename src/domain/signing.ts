import { createHmac, createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, timingSafeEqual, type KeyObject } from 'node:crypto';

/**
 * Signature primitives shared by inbound verification and outbound signing.
 * Pure: node:crypto only, no I/O, never reads the clock.
 */

const WHSEC_PREFIX = 'whsec_';
/** Standard Webhooks asymmetric keys: `whsk_` + base64 of the Ed25519 private seed, `whpk_` + base64 of the public key. */
const WHSK_PREFIX = 'whsk_';
const WHPK_PREFIX = 'whpk_';
/** The PKCS#8 DER header of an Ed25519 private key (RFC 8410); the 32-byte seed follows it. */
const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

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

/** How an endpoint's requests are signed: `v1` HMAC with a shared secret, or `v1a` Ed25519 with a key pair. */
export const SIGNATURE_SCHEMES = ['hmac', 'ed25519'] as const;
export type SignatureScheme = (typeof SIGNATURE_SCHEMES)[number];

/** A new signing secret for a scheme: a `whsec_` secret, or a `whsk_` private key with its `whpk_` public key. */
export function generateSigningSecret(scheme: SignatureScheme): { secret: string; publicKey: string | null } {
  if (scheme === 'hmac') return { secret: generateWebhookSecret(), publicKey: null };
  const pair = generateEd25519KeyPair();
  return { secret: pair.secretKey, publicKey: pair.publicKey };
}

/** Whether a signing secret is an Ed25519 private key (`whsk_`) rather than an HMAC secret (`whsec_`). */
export function isEd25519SigningKey(secret: string): boolean {
  return secret.startsWith(WHSK_PREFIX);
}

/** The private key a `whsk_` secret encodes. */
export function ed25519PrivateKey(secret: string): KeyObject {
  const seed = Buffer.from(secret.slice(WHSK_PREFIX.length), 'base64');
  if (!isEd25519SigningKey(secret) || seed.length !== 32) throw new Error('not a whsk_ Ed25519 private key');
  return createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

/** The `whpk_` public key that verifies what a private key signs: base64 of its raw 32 bytes. */
export function ed25519PublicKeyText(privateKey: KeyObject): string {
  const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
  return WHPK_PREFIX + Buffer.from(jwk.x!, 'base64url').toString('base64');
}

/** A new Ed25519 key pair as Standard Webhooks texts: the `whsk_` private key and the `whpk_` public key. */
export function generateEd25519KeyPair(): { secretKey: string; publicKey: string } {
  const { privateKey } = generateKeyPairSync('ed25519');
  const seed = Buffer.from(privateKey.export({ format: 'jwk' }).d!, 'base64url');
  return { secretKey: WHSK_PREFIX + seed.toString('base64'), publicKey: ed25519PublicKeyText(privateKey) };
}

/** Standard Webhooks v1a signature: `v1a,<base64 Ed25519 signature of "<id>.<ts>.<body>">`. */
export function signEd25519Webhook(privateKey: KeyObject, id: string, timestampSec: number, body: string | Buffer): string {
  const bodyBytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  const content = Buffer.concat([Buffer.from(`${id}.${timestampSec}.`, 'utf8'), bodyBytes]);
  return `v1a,${sign(null, content, privateKey).toString('base64')}`;
}

/**
 * The `webhook-signature` header value: one signature per active secret, space-separated (rotation).
 * A `whsk_` secret signs `v1a` (Ed25519), any other `v1` (HMAC); `privateKeyOf` lets the caller
 * reuse parsed keys instead of parsing one for every attempt.
 */
export function signatureHeader(
  secrets: readonly string[],
  id: string,
  timestampSec: number,
  body: string | Buffer,
  privateKeyOf: (secret: string) => KeyObject = ed25519PrivateKey,
): string {
  return secrets
    .map((secret) =>
      isEd25519SigningKey(secret) ? signEd25519Webhook(privateKeyOf(secret), id, timestampSec, body) : signStandardWebhook(secret, id, timestampSec, body),
    )
    .join(' ');
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
