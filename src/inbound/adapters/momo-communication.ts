import type { InboundAdapter, InboundRequest } from '../adapter.js';
import type { MessageStatus } from '../../domain/message-status.js';
import type { ParsedEvent } from '../../domain/events.js';
import { fallbackDedupeKey } from '../../domain/dedupe.js';
import { messageStatus } from '../../domain/message-status.js';
import { generateHexSecret, hexDigestEqual, hmacSha256Hex } from '../../domain/signing.js';
import {
  header,
  optionalString,
  parseFailure,
  parseJsonObject,
  rawDocument,
  rejected,
  requireString,
  safeParse,
  safeVerify,
  keyOf,
  type JsonObject,
} from './shared.js';

/**
 * Momo Business communication callbacks: `X-Signature` is the hex HMAC-SHA256 of the raw body, with
 * no prefix and no timestamp (the contract writes it lowercase; uppercase is the same digest and is
 * accepted too). The body is flat and carries no stable event id, so the logical event is
 * (resource, transition): a repeat with a new callback timestamp is the same event.
 */

const SIGNATURE_FORMAT = /^[0-9a-fA-F]{64}$/;

/**
 * Fields that differ between callbacks about the same thing; excluded from the fallback key so a
 * re-sent callback without a resource id still dedupes. Only used when no resource id is present.
 */
const VOLATILE_FIELDS = ['timestamp', 'signature', 'sent_at', 'delivered_at', 'updated_at'];

/** Resource kinds in priority order, for bodies that name more than one id. */
const RESOURCES = [
  { kind: 'message', field: 'message_id' },
  { kind: 'order', field: 'order_id' },
  { kind: 'group', field: 'group_id' },
] as const;

function verify(request: InboundRequest, secret: string): ReturnType<InboundAdapter['verify']> {
  const signature = header(request, 'x-signature');
  if (signature === undefined) return rejected('missing_signature', 'X-Signature header is missing');
  // The contract fixes the format; a `sha256=` prefix is some other sender.
  if (!SIGNATURE_FORMAT.test(signature)) return rejected('bad_signature', 'X-Signature must be 64 hex characters');
  if (secret === '') return rejected('bad_signature', 'source has no signing secret');
  const expected = hmacSha256Hex(secret, request.rawBody);
  return hexDigestEqual(signature, expected) ? { ok: true } : rejected('bad_signature', 'X-Signature does not match the body');
}

/** The resource the event is about: the one its event name points at, else the first id present. */
function findResource(body: JsonObject, event: string): { kind: string; id: string } | undefined {
  const present = RESOURCES.flatMap(({ kind, field }) => {
    const id = optionalString(body, field);
    return id === undefined ? [] : [{ kind, id }];
  });
  const prefix = event.split('.')[0];
  return present.find((resource) => resource.kind === prefix) ?? present[0];
}

function parseEvent(request: InboundRequest): ParsedEvent {
  const json = parseJsonObject(request.rawBody);
  const body = json.value;
  const type = requireString(body, 'event');
  const resource = findResource(body, type);
  // The body is flat: all of it is the business payload.
  const data = rawDocument(json);
  if (resource === undefined) {
    return { type, dedupeKey: fallbackDedupeKey(body, VOLATILE_FIELDS), data };
  }

  const statusValue = optionalString(body, 'status');
  let status: MessageStatus | undefined;
  if (resource.kind === 'message') {
    if (statusValue === undefined && type === 'message.status') parseFailure('missing_field', 'status is required for message.status');
    if (statusValue !== undefined) {
      status = messageStatus(statusValue);
      if (status === undefined) parseFailure('invalid_field', `status "${statusValue}" is not a known message status`);
    }
  }
  // Without a status field the event name itself is the transition (e.g. order.created).
  const transition = statusValue ?? type;
  return {
    type,
    dedupeKey: keyOf(resource.kind, resource.id, transition),
    messageId: resource.id,
    ...(status !== undefined && { status }),
    data,
  };
}

export const momoCommunication: InboundAdapter = {
  type: 'momo-communication',
  verify: (request, secret) => safeVerify(() => verify(request, secret)),
  parse: (request) => safeParse(() => parseEvent(request)),
  generateSecret: () => generateHexSecret(),
};
