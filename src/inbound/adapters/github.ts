import type { InboundRequest } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { hmacAdapter } from './hmac.js';
import { parseJsonObject, rawDocument, requireHeaderField } from './shared.js';

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`, no timestamp.
 * `X-GitHub-Delivery` is the same on a redelivery (the inbox key) and `X-GitHub-Event` names the
 * event (`push`, `pull_request`); the body's `action` stays in the forwarded data.
 */
const DELIVERY = 'x-github-delivery';

function parseEvent(request: InboundRequest): ParsedEvent {
  const delivery = requireHeaderField(request, DELIVERY);
  const type = requireHeaderField(request, 'x-github-event');
  // Only the JSON content type is supported (a webhook set to form encoding is refused here).
  const json = parseJsonObject(request.rawBody);
  return { type, dedupeKey: delivery, data: rawDocument(json) };
}

export const github = hmacAdapter({
  type: 'github',
  scheme: {
    signature: { header: 'x-hub-signature-256', prefix: 'sha256=' },
    algorithm: 'sha256',
    encoding: 'hex',
    signedContent: [{ placeholder: 'body' }],
  },
  identityHeader: DELIVERY,
  parse: parseEvent,
});
