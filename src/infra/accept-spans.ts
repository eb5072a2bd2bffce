/**
 * The spans of an event's durable acceptance, shared by provider callbacks and published events:
 * `webhook.accept` (the one statement that stores the event and fans it out) and its child
 * `webhook.fan_out`, under which every attempt of every delivery later hangs. The fan-out span's
 * context is made before the statement runs, so it is stored with the event in that statement.
 */
import { failSpan, startSpan, storedTraceParent, type Attributes, type Span } from './tracing.js';

export interface AcceptResult {
  outcome: string;
  eventId: string;
  receiptId?: string;
  messageId?: string | null;
  /** Deliveries created (pending) and dead-lettered at once (endpoint disabled). */
  pending: number;
  deadDisabled: number;
}

export interface AcceptSpans {
  /** What to store with the event: the fan-out span's traceparent, or null when it is not sampled. */
  traceParent: string | null;
  /** The statement answered: its ids go on these spans and on the request's, and both end. */
  stored(result: AcceptResult): void;
  failed(err: unknown): void;
}

/**
 * Starts the acceptance spans under `request` (the request's span; none starts a trace, as an
 * operational event or a reconciled one does); undefined when tracing is off.
 */
export function startAccept(attributes: Attributes, request?: Span): AcceptSpans | undefined {
  const accept = startSpan('webhook.accept', { attributes, parent: request });
  if (!accept) return undefined;
  const fanOut = startSpan('webhook.fan_out', { parent: accept })!;
  const ends = (span: Span) => span.isRecording() && span.end();
  return {
    traceParent: storedTraceParent(fanOut),
    stored(result) {
      const ids: Attributes = {
        'webhook.event_id': result.eventId,
        'webhook.outcome': result.outcome,
        ...(result.receiptId && { 'webhook.receipt_id': result.receiptId }),
        ...(result.messageId && { 'webhook.message_id': result.messageId }),
      };
      accept.setAttributes(ids);
      request?.setAttributes(ids);
      fanOut.setAttributes({ 'webhook.event_id': result.eventId, 'webhook.deliveries.pending': result.pending, 'webhook.deliveries.dead': result.deadDisabled });
      ends(fanOut);
      ends(accept);
    },
    failed(err) {
      failSpan(accept, err);
      ends(accept);
      failSpan(fanOut, err);
      ends(fanOut);
    },
  };
}
