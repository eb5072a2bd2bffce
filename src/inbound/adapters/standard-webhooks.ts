import type { InboundAdapter, InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { generateWebhookSecret, verifyStandardWebhook } from '../../domain/signing.js';
import {
  checkTimestamp,
  correlationId,
  header,
  parseJsonObject,
  rawDocument,
  rawMember,
  rejected,
  repeatDigestWithHeader,
  requireHeaderField,
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
  const webhookId = requireHeaderField(request, 'webhook-id');
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

/** webhook-id is the event's identity and is not in the body. */
const repeatDigest = (request: InboundRequest) => repeatDigestWithHeader(request, 'webhook-id');

export const standardWebhooks: InboundAdapter = {
  type: 'standard-webhooks',
  verify: (request, secret) => safeVerify(() => verify(request, secret)),
  parse: (request) => safeParse(() => parseEvent(request)),
  repeatDigest,
  generateSecret: () => generateWebhookSecret(),
};
