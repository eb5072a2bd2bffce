/**
 * The spans of delivery attempts, across the queue hop: each attempt is the CLIENT span of its
 * request to the endpoint, whose parent is the span stored with its work (the event's fan-out, or a
 * replay's), so an attempt made by any worker, now or an hour later, joins that trace.
 *
 * The stored contexts come with the claimed row (src/delivery/sql/claimed.ts), so tracing reads
 * nothing of its own. Work stored without a trace context was accepted untraced (tracing off, or
 * not sampled): its attempts make no spans. That is the sampling decision made once per event, kept
 * at every hop.
 */
import type { ClaimedDelivery } from '../delivery/index.js';
import { RecentMap } from '../domain/recent.js';
import { contextUnder, failSpan, remoteSpanContext, SpanKind, startSpan, toTraceParent, type Attributes, type Span } from '../infra/tracing.js';

/** `url.full` and the server's name and port, never the query, fragment or credentials (a token may be there). */
function targetAttributes(url: string): Attributes {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return {};
  }
  const port = target.port ? Number(target.port) : target.protocol === 'https:' ? 443 : 80;
  return { 'url.full': `${target.protocol}//${target.host}${target.pathname}`, 'server.address': target.hostname, 'server.port': port };
}

/** Each endpoint URL's attributes, parsed once: a busy endpoint's attempts would parse the same URL each time. */
const targets = new RecentMap<Attributes>(10_000);
function cachedTargetAttributes(url: string): Attributes {
  let found = targets.get(url);
  if (!found) targets.set(url, (found = targetAttributes(url)));
  return found;
}

/**
 * The attempt's span: its request to the endpoint, a CLIENT span named by the HTTP semantic
 * conventions, child of its work's stored span; a replay's attempt also links to the event's own
 * trace. Undefined when the work was not traced. One span per attempt: a second, around the
 * request alone, would cost as much again for little more than the signing and recording times.
 */
function startAttemptSpan(claimed: ClaimedDelivery, startTime?: number): Span | undefined {
  const own = remoteSpanContext(claimed.trace_parent);
  const event = remoteSpanContext(claimed.event_trace_parent);
  const parent = own ?? event;
  if (!parent) return undefined;
  return startSpan('POST', {
    kind: SpanKind.CLIENT,
    startTime,
    parent: contextUnder(parent),
    ...(own && event && { links: [{ context: event, attributes: { 'webhook.link': 'original_event' } }] }),
    attributes: {
      'http.request.method': 'POST',
      ...cachedTargetAttributes(claimed.endpoint.url),
      'webhook.delivery_id': claimed.id,
      'webhook.event_id': claimed.event_id,
      'webhook.endpoint_id': claimed.endpoint.id,
      'webhook.attempt': claimed.attempt_count,
      'webhook.trigger': claimed.next_trigger,
    },
  });
}

export interface RequestAnswer {
  statusCode: number | null;
  errorClass?: string | null;
  message?: string;
}

/**
 * The span of one attempt, made off its critical path: once the endpoint has answered, with the
 * time the request began. Only an endpoint that asks for a `traceparent` gets its span begun before
 * the request (header).
 */
export class AttemptTracing {
  private span: Span | undefined;
  private begun = false;
  private ended = false;

  constructor(private readonly claimed: ClaimedDelivery) {}

  private begin(startTime = Date.now()): Span | undefined {
    if (!this.begun) {
      this.begun = true;
      this.span = startAttemptSpan(this.claimed, startTime);
    }
    return this.span;
  }

  /** The `traceparent` for an endpoint that asks for one: the span begins now. */
  header(): Record<string, string> {
    const span = this.begin();
    return span ? { traceparent: toTraceParent(span.spanContext()) } : {};
  }

  /** The endpoint answered (or failed to): the span, begun at `requestStartedAt` unless header() began it. */
  answered(requestStartedAt: number, answer: RequestAnswer): Span | undefined {
    const span = this.begin(requestStartedAt);
    if (!span) return undefined;
    if (answer.statusCode !== null) span.setAttribute('http.response.status_code', answer.statusCode);
    if (answer.errorClass) failSpan(span, answer.message ?? answer.errorClass, answer.errorClass);
    else if (answer.statusCode !== null && answer.statusCode >= 400) failSpan(span, `HTTP ${answer.statusCode}`, String(answer.statusCode));
    return span;
  }

  /** What the platform made of it (`success`, `retry`, `dead`, `egress_failed`); the span ends. */
  end(outcome?: string, err?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    const span = this.begin();
    if (!span) return;
    if (outcome) span.setAttribute('webhook.outcome', outcome);
    if (err !== undefined) failSpan(span, err);
    span.end();
  }
}
