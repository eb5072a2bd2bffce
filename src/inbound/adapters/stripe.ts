import type { InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { hmacAdapter } from './hmac.js';
import { correlationId, isObject, parseJsonObject, rawDocument, requireString } from './shared.js';

/**
 * Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=..][,v0=..]`, v1 = HMAC-SHA256 of
 * `<t>.<raw body>` keyed with the endpoint's `whsec_…` text. Several v1 entries appear while a
 * secret is rolled; any one matching is enough. The Event object carries its own id (`evt_…`, the
 * same on every retry) and type; the object it is about (`data.object.id`) is the message.
 */
function parseEvent(request: InboundRequest): ParsedEvent {
  const json = parseJsonObject(request.rawBody);
  const body = json.value;
  const id = requireString(body, 'id');
  const type = requireString(body, 'type');
  const object = isObject(body.data) && isObject(body.data.object) ? body.data.object : undefined;
  const messageId = object === undefined ? undefined : correlationId(object, 'id', 'data.object.id');
  return { type, dedupeKey: id, ...(messageId !== undefined && { messageId }), data: rawDocument(json) };
}

export const stripe = hmacAdapter({
  type: 'stripe',
  scheme: {
    signature: { header: 'stripe-signature', timestampKey: 't', signatureKey: 'v1' },
    algorithm: 'sha256',
    encoding: 'hex',
    signedContent: [{ placeholder: 'timestamp' }, { text: '.' }, { placeholder: 'body' }],
  },
  parse: parseEvent,
});
