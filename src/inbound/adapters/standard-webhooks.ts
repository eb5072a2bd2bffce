import type { InboundAdapter, InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { digestHex } from '../../domain/dedupe.js';
import { generateWebhookSecret, verifyStandardWebhook } from '../../domain/signing.js';
import {
  checkTimestamp,
  correlationId,
  header,
  MAX_FIELD_LENGTH,
  parseFailure,
  parseJsonObject,
  rawDocument,
  rawMember,
  rejected,
  requireString,
  safeParse,
  safeVerify,
} from './shared.js';

/**
 * Any sender following Standard Webhooks v1: `webhook-id`, `webhook-timestamp` and
 * `webhook-signature` (`v1,<base64>` entries, space-separated) over `<id>.<timestamp>.<body>`,
 * keyed with the base64-decoded `whsec_` secret. webhook-id is stable across retries: the inbox key.
 */

function verify(request: InboundRequest, secret: string): ReturnType<InboundAdapter['verify']> {
  const id = header(request, 'webhook-id');
  const timestamp = header(request, 'webhook-timestamp');
  const signature = header(request, 'webhook-signature');
  if (id === undefined || timestamp === undefined || signature === undefined) {
    return rejected('missing_signature', 'webhook-id, webhook-timestamp and webhook-signature are required');
  }
  const time = checkTimestamp(timestamp, request.now);
  if (!time.ok) return time;
  return verifyStandardWebhook(secret, id, time.seconds, request.rawBody, signature)
    ? { ok: true }
    : rejected('bad_signature', 'no v1 signature in webhook-signature matches the body');
}

function parseEvent(request: InboundRequest): ParsedEvent {
  // Verified requests always carry webhook-id; checked again so parse stands on its own.
  const webhookId = header(request, 'webhook-id');
  if (webhookId === undefined) parseFailure('missing_field', 'webhook-id header is required');
  if (webhookId.length > MAX_FIELD_LENGTH) parseFailure('invalid_field', `webhook-id is longer than ${MAX_FIELD_LENGTH} characters`);
  const json = parseJsonObject(request.rawBody);
  const body = json.value;
  const type = requireString(body, 'type');
  const messageId = correlationId(body, 'messageId') ?? correlationId(body, 'message_id');
  return {
    type,
    dedupeKey: webhookId,
    ...(messageId !== undefined && { messageId }),
    // A sender that does not wrap its payload in `data` has the whole body forwarded.
    data: rawMember(json, 'data') ?? rawDocument(json),
  };
}

/**
 * webhook-id is the event's identity and is not in the body: two messages may carry identical bytes
 * (`{"type":"ping"}`), so a repeat is the same id AND the same body. The id is length-prefixed so
 * no (id, body) pair can be spelled as another.
 */
function repeatDigest(request: InboundRequest): string {
  const id = header(request, 'webhook-id') ?? '';
  return digestHex(Buffer.concat([Buffer.from(`${Buffer.byteLength(id)}:${id}.`, 'utf8'), request.rawBody]));
}

export const standardWebhooks: InboundAdapter = {
  type: 'standard-webhooks',
  verify: (request, secret) => safeVerify(() => verify(request, secret)),
  parse: (request) => safeParse(() => parseEvent(request)),
  repeatDigest,
  generateSecret: () => generateWebhookSecret(),
};
