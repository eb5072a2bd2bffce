/**
 * OpenTelemetry tracing, configured only by the standard OTEL_* variables (docs/operations/tracing.md).
 *
 * Off unless an OTLP endpoint is set: then nothing of the SDK is even loaded, and every helper here
 * returns at its first line, so the hot paths pay one boolean test. On, the SDK's own BatchSpanProcessor
 * exports over OTLP/HTTP, the sampler is the one OTEL_TRACES_SAMPLER names (parent-based by
 * default), and W3C trace context is read from requests and, where an endpoint asks, written to them.
 *
 * A trace's context crosses the queue as a W3C `traceparent` string kept with the event (and with a
 * replayed delivery): see toTraceParent / remoteParent.
 */
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanContext,
} from '@opentelemetry/api';

export { SpanKind, SpanStatusCode, type Span, type Context, type Attributes };

export const tracerName = 'webhook-relay';

let enabled = false;
let shutdownProvider: (() => Promise<void>) | undefined;
/** @opentelemetry/core's W3C parser, loaded with the SDK: with tracing off nothing of it is imported. */
let parseTraceParent: ((text: string) => SpanContext | null) | undefined;

/** Whether spans are made at all; false costs the callers one test. */
export function tracingOn(): boolean {
  return enabled;
}

/**
 * Tracing is on when an OTLP endpoint is given (OTEL_EXPORTER_OTLP_ENDPOINT or its _TRACES_ form)
 * and neither OTEL_SDK_DISABLED=true nor OTEL_TRACES_EXPORTER=none says otherwise. Unlike the SDK's
 * own default (localhost:4318), nothing set means off: a platform that nobody asked to trace sends nothing.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if ((env.OTEL_SDK_DISABLED ?? '').trim().toLowerCase() === 'true') return false;
  if ((env.OTEL_TRACES_EXPORTER ?? '').split(',').some((e) => e.trim().toLowerCase() === 'none')) return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim());
}

/**
 * Starts the SDK when the environment asks for it (see tracingRequested); answers whether it did.
 * The SDK reads the rest itself: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, the sampler and its
 * argument, OTEL_BSP_* for batching, OTEL_EXPORTER_OTLP_* for the endpoint, headers and timeout.
 */
export async function startTracing(env: NodeJS.ProcessEnv, serviceVersion: string, role: string): Promise<boolean> {
  if (enabled || !tracingRequested(env)) return enabled;
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { AsyncLocalStorageContextManager }, core, resources] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-base'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/context-async-hooks'),
      import('@opentelemetry/core'),
      import('@opentelemetry/resources'),
    ]);
  // Ours first, then the environment's, which wins (OTEL_SERVICE_NAME names the service).
  const resource = resources
    .defaultResource()
    .merge(resources.resourceFromAttributes({
      'service.name': 'webhook-relay',
      'service.version': serviceVersion,
      'webhook_relay.role': role,
      'process.pid': process.pid,
    }))
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())] });
  trace.setGlobalTracerProvider(provider);
  // The API's spans find their parent through the middleware chain, which needs the async context
  // manager. A worker passes its spans down explicitly, so it runs without one: its hooks would cost
  // every promise of every attempt a little (docs/operations/tracing.md, "Cost").
  if (role !== 'worker') context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  shutdownProvider = () => provider.shutdown();
  parseTraceParent = core.parseTraceParent;
  enabled = true;
  return true;
}

/** Exports what is still buffered and stops; spans ended after this are dropped. */
export async function stopTracing(): Promise<void> {
  const shutdown = shutdownProvider;
  shutdownProvider = undefined;
  enabled = false;
  await shutdown?.();
}

export function tracer() {
  return trace.getTracer(tracerName);
}

/** The span active in the current async context, if any. */
export function activeSpan(): Span | undefined {
  return enabled ? trace.getSpan(context.active()) : undefined;
}

/** W3C `traceparent` text of a span context (version 00). */
export function toTraceParent(sc: SpanContext): string {
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED ? '01' : '00'}`;
}

function isSampled(sc: SpanContext): boolean {
  return (sc.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED;
}

/**
 * What is stored with work that crosses the queue: the span's traceparent when it is sampled, null
 * when it is not (or tracing is off). Null means "not traced": the sampling decision is made once,
 * where the trace began, and its later hops keep it.
 */
export function storedTraceParent(span: Span | undefined): string | null {
  if (!span) return null;
  const sc = span.spanContext();
  return isSampled(sc) ? toTraceParent(sc) : null;
}

/** The span context a stored traceparent names, as a remote parent; undefined for null or malformed text. */
export function remoteSpanContext(traceParent: string | null | undefined): SpanContext | undefined {
  if (!traceParent || !parseTraceParent) return undefined;
  const sc = parseTraceParent(traceParent);
  return sc ? { ...sc, isRemote: true } : undefined;
}

/** The context whose parent is the stored span (for a child span made after a queue hop). */
export function contextUnder(parent: SpanContext): Context {
  return trace.setSpanContext(ROOT_CONTEXT, parent);
}

/** The incoming request's trace context (its `traceparent`), or the root when it has none. */
export function extractContext(headers: Record<string, string | string[] | undefined>): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  links?: Link[];
  /** The parent; the active context when absent. */
  parent?: Context;
}

/** Runs `work` outside any trace, so what it starts is a trace of its own (another event's, say). */
export function outsideTraces<T>(work: () => T): T {
  return enabled ? context.with(ROOT_CONTEXT, work) : work();
}

/** Starts a span (undefined when tracing is off); the caller ends it. */
export function startSpan(name: string, options: SpanOptions = {}): Span | undefined {
  if (!enabled) return undefined;
  const { parent, ...rest } = options;
  return tracer().startSpan(name, rest, parent ?? context.active());
}

/** Runs `work` with `span` as the active span, so spans and log lines made inside are its children. */
export function withSpan<T>(span: Span | undefined, work: () => T): T {
  return span ? context.with(trace.setSpan(context.active(), span), work) : work();
}

/**
 * Runs `work` with `span` active, and keeps it active in the listeners later added to `emitters`: a
 * request body is read in stream callbacks, which otherwise run in the socket's context.
 */
export function withSpanBound<T>(span: Span, emitters: NodeJS.EventEmitter[], work: () => T): T {
  const ctx = trace.setSpan(context.active(), span);
  for (const emitter of emitters) context.bind(ctx, emitter);
  return context.with(ctx, work);
}

/**
 * Runs `work` in a child span of the active one that ends when the work settles, marked as an error
 * when it throws. Without tracing, just runs it.
 */
export async function inSpan<T>(name: string, attributes: Attributes, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  if (!enabled) return work(undefined);
  const span = tracer().startSpan(name, { attributes }, context.active());
  try {
    return await context.with(trace.setSpan(context.active(), span), () => work(span));
  } catch (err) {
    failSpan(span, err);
    throw err;
  } finally {
    span.end();
  }
}

/** Marks a span as failed with the error's class (`error.type`) and message. */
export function failSpan(span: Span | undefined, err: unknown, type?: string): void {
  if (!span) return;
  const message = err instanceof Error ? err.message : String(err);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
  span.setAttribute('error.type', type ?? (err instanceof Error ? err.constructor.name : 'error'));
}

/**
 * The trace and span id of the active sampled span, for a log line or a histogram exemplar; empty
 * when there is none, so callers can spread it unconditionally.
 */
export function traceIds(span: Span | undefined = activeSpan()): { trace_id: string; span_id: string } | Record<string, never> {
  if (!span) return {};
  const sc = span.spanContext();
  return isSampled(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : {};
}
