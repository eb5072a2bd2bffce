import type { InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { hmacAdapter } from './hmac.js';
import { parseJsonObject, rawDocument, requireHeaderField } from './shared.js';

/**
 * Shopify: `X-Shopify-Hmac-Sha256` = base64 HMAC-SHA256 of the raw body, keyed with the app's
 * client secret, no timestamp. `X-Shopify-Webhook-Id` is the same on every retry (the inbox key);
 * `X-Shopify-Topic` names the event. Topics are written `orders/create`; the event type is
 * `orders.create` so endpoints can subscribe to `orders.*` like any other type.
 */
const WEBHOOK_ID = 'x-shopify-webhook-id';

function parseEvent(request: InboundRequest): ParsedEvent {
  const webhookId = requireHeaderField(request, WEBHOOK_ID);
  const topic = requireHeaderField(request, 'x-shopify-topic');
  const json = parseJsonObject(request.rawBody);
  return { type: topic.replaceAll('/', '.'), dedupeKey: webhookId, data: rawDocument(json) };
}

export const shopify = hmacAdapter({
  type: 'shopify',
  scheme: {
    signature: { header: 'x-shopify-hmac-sha256', prefix: '' },
    algorithm: 'sha256',
    encoding: 'base64',
    signedContent: [{ placeholder: 'body' }],
  },
  identityHeader: WEBHOOK_ID,
  parse: parseEvent,
});
