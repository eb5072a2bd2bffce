/**
 * The spans of delivery attempts, across the queue hop: each attempt is the CLIENT span of its
 * request to the endpoint, whose parent is the span stored with its work (the event's fan-out, or a
 * replay's), so an attempt made by any worker, now or an hour later, joins that trace.
 *
 * Work stored without a trace context was accepted untraced (tracing off, or not sampled): its
 * attempts make no spans. That is the sampling decision made once per event, kept at every hop.
 */
import type { Knex } from 'knex';
import type { ClaimedDelivery } from '../delivery/index.js';
import { Batcher } from '../infra/batcher.js';
import { RecentMap } from '../infra/recent.js';
import { contextUnder, failSpan, remoteSpanContext, SpanKind, startSpan, toTraceParent, type Span } from '../infra/tracing.js';
import { readTraceParents } from '../store/trace-parents-store.js';

interface Wanted {
  eventId: string;
  /** Only a replayed delivery has a context of its own. */
  deliveryId?: string;
}

interface Found {
  event: string | null;
  delivery: string | null;
}

/** Events' contexts kept by id: they never change, and an event's deliveries are made close together. */
const eventContextsKept = 10_000;

/**
 * Reads stored trace contexts, many attempts' in one statement (group commit, as intake does), and
 * keeps each event's, so an event's other deliveries and retries read nothing.
 */
export class TraceParents {
  private readonly events = new RecentMap<string | null>(eventContextsKept);
  private readonly reads: Batcher<Wanted, Found>;

  constructor(db: Knex) {
    this.reads = new Batcher({
      maxBatch: 256,
      maxInFlight: 2,
      run: async (items) => {
        const found = await readTraceParents(
          db,
          [...new Set(items.map((i) => i.eventId))],
          items.flatMap((i) => (i.deliveryId ? [i.deliveryId] : [])),
        );
        return items.map((i) => {
          const event = found.events.get(i.eventId) ?? null;
          this.events.set(i.eventId, event);
          return { event, delivery: i.deliveryId ? (found.deliveries.get(i.deliveryId) ?? null) : null };
        });
      },
    });
  }

  async of(claimed: ClaimedDelivery): Promise<Found> {
    const replayed = claimed.replayed_at !== null;
    const event = this.events.get(claimed.event_id);
    if (event !== undefined && !replayed) return { event, delivery: null };
    return this.reads.submit({ eventId: claimed.event_id, ...(replayed && { deliveryId: claimed.id }) });
  }
}

/** `url.full` and the server's name and port, never the query, fragment or credentials (a token may be there). */
function targetAttributes(url: string): Record<string, string | number> {
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return {};
  }
  const port = target.port ? Number(target.port) : target.protocol === 'https:' ? 443 : 80;
  return { 'url.full': `${target.protocol}//${target.host}${target.pathname}`, 'server.address': target.hostname, 'server.port': port };
}

/**
 * The attempt's span: its request to the endpoint, a CLIENT span named by the HTTP semantic
 * conventions, child of its work's stored span; a replay's attempt also links to the event's own
 * trace. Undefined when the work was not traced. One span per attempt: a second, around the
 * request alone, would cost as much again for little more than the signing and recording times.
 */
function startAttemptSpan(claimed: ClaimedDelivery, stored: Found, startTime?: number): Span | undefined {
  const own = remoteSpanContext(stored.delivery);
  const event = remoteSpanContext(stored.event);
  const parent = own ?? event;
  if (!parent) return undefined;
  return startSpan('POST', {
    kind: SpanKind.CLIENT,
    startTime,
    parent: contextUnder(parent),
    ...(own && event && { links: [{ context: event, attributes: { 'webhook.link': 'original_event' } }] }),
    attributes: {
      'http.request.method': 'POST',
      ...targetAttributes(claimed.endpoint.url),
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
 * The span of one attempt, made off its critical path: the stored parent is read while the request
 * is in flight, and the span is made afterwards with the time it began. Only an endpoint that asks
 * for a `traceparent` waits for its parent before the request (header).
 */
export class AttemptTracing {
  private readonly parents: Promise<Found>;
  private span: Promise<Span | undefined> | undefined;
  private ended = false;

  constructor(
    private readonly claimed: ClaimedDelivery,
    traceParents: TraceParents,
  ) {
    // Tracing never holds a delivery back: without its parent the attempt goes untraced.
    this.parents = traceParents.of(claimed).catch(() => ({ event: null, delivery: null }));
  }

  private begin(startTime = Date.now()): Promise<Span | undefined> {
    return (this.span ??= this.parents.then((found) => startAttemptSpan(this.claimed, found, startTime)));
  }

  /** The `traceparent` for an endpoint that asks for one: the span begins now. */
  async header(): Promise<Record<string, string>> {
    const span = await this.begin();
    return span ? { traceparent: toTraceParent(span.spanContext()) } : {};
  }

  /** The endpoint answered (or failed to): the span, begun at `requestStartedAt` unless header() began it. */
  async answered(requestStartedAt: number, answer: RequestAnswer): Promise<Span | undefined> {
    const span = await this.begin(requestStartedAt);
    if (!span) return undefined;
    if (answer.statusCode !== null) span.setAttribute('http.response.status_code', answer.statusCode);
    if (answer.errorClass) failSpan(span, answer.message ?? answer.errorClass, answer.errorClass);
    else if (answer.statusCode !== null && answer.statusCode >= 400) failSpan(span, `HTTP ${answer.statusCode}`, String(answer.statusCode));
    return span;
  }

  /** What the platform made of it (`success`, `retry`, `dead`, `egress_failed`); the span ends. */
  async end(outcome?: string, err?: unknown): Promise<void> {
    if (this.ended) return;
    this.ended = true;
    const span = await this.begin();
    if (!span) return;
    if (outcome) span.setAttribute('webhook.outcome', outcome);
    if (err !== undefined) failSpan(span, err);
    span.end();
  }
}
