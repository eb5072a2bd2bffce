import type { InboundAdapter, InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { generateHexSecret, hexDigestEqual, hmacSha256Hex } from '../../domain/signing.js';
import {
  checkTimestamp,
  correlationId,
  header,
  isObject,
  keyOf,
  parseFailure,
  parseJsonObject,
  parseKeyedSignatureHeader,
  rawMember,
  rejected,
  requireObject,
  requireString,
  safeParse,
  safeVerify,
  type JsonObject,
} from './shared.js';

/**
 * Momo Business automation callbacks: `X-Momo-Signature: t=<unix seconds>,v1=<hex>` where v1 is the
 * HMAC-SHA256 of `<t>.<raw body>`. The body wraps the business payload in `data`; the event id is
 * stable across retries, and (subscription id, event id) is the inbox key.
 */

function verify(request: InboundRequest, secret: string): ReturnType<InboundAdapter['verify']> {
  const value = header(request, 'x-momo-signature');
  if (value === undefined) return rejected('missing_signature', 'X-Momo-Signature header is missing');
  const parsed = parseKeyedSignatureHeader(value);
  if (parsed === undefined) return rejected('bad_signature', 'X-Momo-Signature must be t=<unix seconds>,v1=<hex>');
  const time = checkTimestamp(parsed.timestamp, request.now);
  if (!time.ok) return time;
  if (secret === '') return rejected('bad_signature', 'source has no signing secret');

  // Sign the normalized number, as the provider's reference receiver does (str(int(t))).
  const signed = Buffer.concat([Buffer.from(`${time.seconds}.`, 'utf8'), request.rawBody]);
  const expected = hmacSha256Hex(secret, signed);
  let matched = false;
  for (const candidate of parsed.signatures) {
    // Every candidate is compared (no early exit); hex in either case, anything else never matches.
    if (hexDigestEqual(candidate, expected)) matched = true;
  }
  return matched ? { ok: true } : rejected('bad_signature', 'no v1 signature matches the body');
}

/**
 * The provider's ordering hint: top-level sequence/version first, then the subject's. Only whole
 * numbers are a sequence (it is stored as a bigint); a fractional or huge value is ignored like
 * any other loosely used field, rather than failing the insert of an otherwise valid event.
 */
function findSequence(body: JsonObject, subject: JsonObject | undefined): number | undefined {
  for (const holder of [body, subject]) {
    for (const field of ['sequence', 'version']) {
      const value = holder !== undefined && Object.hasOwn(holder, field) ? holder[field] : undefined;
      if (typeof value === 'number' && Number.isSafeInteger(value)) return value;
    }
  }
  return undefined;
}

function parseEvent(request: InboundRequest): ParsedEvent {
  const json = parseJsonObject(request.rawBody);
  const body = json.value;
  const id = requireString(body, 'id');
  const type = requireString(body, 'event');
  const subscriptionId = requireString(requireObject(body, 'subscription'), 'id', 'subscription.id');
  // `data` may be any JSON value, null included, but it must be there: it is what gets forwarded.
  const data = rawMember(json, 'data');
  if (data === undefined) parseFailure('missing_field', 'data is required');
  const subject = isObject(body.subject) ? body.subject : undefined;
  // Subjects without a string id (or no subject at all) simply correlate to no message.
  const subjectId = subject === undefined ? undefined : correlationId(subject, 'id', 'subject.id');
  const sequence = findSequence(body, subject);
  return {
    type,
    dedupeKey: keyOf(subscriptionId, id),
    ...(subjectId !== undefined && { messageId: subjectId }),
    ...(sequence !== undefined && { sequence }),
    data,
  };
}

export const momoAutomation: InboundAdapter = {
  type: 'momo-automation',
  verify: (request, secret) => safeVerify(() => verify(request, secret)),
  parse: (request) => safeParse(() => parseEvent(request)),
  generateSecret: () => generateHexSecret(),
};
