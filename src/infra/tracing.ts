/**
 * OpenTelemetry tracing, configured only by the standard OTEL_* variables (docs/operations/tracing.md).
 *
 * Off unless an OTLP endpoint is set: then nothing of the SDK is even loaded, and every helper here
 * returns at its first line, so the hot paths pay one boolean test. On, the SDK's own BatchSpanProcessor
 * exports over OTLP/HTTP, the sampler is the one OTEL_TRACES_SAMPLER names (parent-based by
 * default), and W3C trace context is read from requests and, where an endpoint asks, written to them.
 *
 * Each span is handed its parent explicitly. There is no async context manager: Node 20's
 * AsyncLocalStorage hooks every promise, and with it intake lost a quarter of its throughput
 * (docs/performance.md, "Tracing").
 *
 * A trace's context crosses the queue as a W3C `traceparent` string kept with the event (and with a
 * replayed delivery): see toTraceParent / remoteSpanContext.
 */
import {
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
  type Tracer,
} from '@opentelemetry/api';
import { ConfigError } from '../config/index.js';
import { RecentMap } from '../domain/recent.js';

export { SpanKind, SpanStatusCode, type Span, type Context, type Attributes };

const tracerName = 'webhook-relay';

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
  const protocol = otlpProtocol(env);
  const [{ BasicTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, core, resources] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'),
    protocol === 'http/json' ? import('@opentelemetry/exporter-trace-otlp-http') : import('@opentelemetry/exporter-trace-otlp-proto'),
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
  propagation.setGlobalPropagator(new core.W3CTraceContextPropagator());
  shutdownProvider = () => provider.shutdown();
  parseTraceParent = core.parseTraceParent;
  enabled = true;
  return true;
}

/**
 * OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL: `http/protobuf` (the
 * specification's default, and about a third of JSON's bytes to build and send) or `http/json`.
 * gRPC is not offered: a collector takes OTLP over HTTP on 4318.
 */
export function otlpProtocol(env: NodeJS.ProcessEnv): 'http/protobuf' | 'http/json' {
  const value = (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || 'http/protobuf').trim();
  if (value === 'http/protobuf' || value === 'http/json') return value;
  throw new ConfigError(`OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json, got "${value}"`);
}

/** Exports what is still buffered and stops; spans ended after this are dropped. */
export async function stopTracing(): Promise<void> {
  const shutdown = shutdownProvider;
  shutdownProvider = undefined;
  enabled = false;
  cachedTracer = undefined;
  remoteContexts.clear();
  await shutdown?.();
}

/** The provider's tracer, looked up once per provider: every span would otherwise look it up by name. */
let cachedTracer: Tracer | undefined;
function tracer(): Tracer {
  return (cachedTracer ??= trace.getTracer(tracerName));
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

/**
 * Stored traceparents already parsed: an event's deliveries and their retries share one, and
 * parsing it is a regular expression per attempt. Frozen, since every attempt gets the same object.
 */
const remoteContexts = new RecentMap<SpanContext | null>(10_000);

/** The span context a stored traceparent names, as a remote parent; undefined for null or malformed text. */
export function remoteSpanContext(traceParent: string | null | undefined): SpanContext | undefined {
  if (!traceParent || !parseTraceParent) return undefined;
  let sc = remoteContexts.get(traceParent);
  if (sc === undefined) {
    const parsed = parseTraceParent(traceParent);
    sc = parsed ? Object.freeze({ ...parsed, isRemote: true }) : null;
    remoteContexts.set(traceParent, sc);
  }
  return sc ?? undefined;
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
  /** When it began, if before now (epoch milliseconds). */
  startTime?: number;
  /** The parent: a span, or a context (a remote parent, an incoming request's); none starts a trace. */
  parent?: Span | Context;
}

const isSpan = (parent: Span | Context): parent is Span => typeof (parent as Span).spanContext === 'function';

/** Starts a span (undefined when tracing is off); the caller ends it. */
export function startSpan(name: string, options: SpanOptions = {}): Span | undefined {
  if (!enabled) return undefined;
  const { parent, ...rest } = options;
  const context = parent === undefined ? ROOT_CONTEXT : isSpan(parent) ? trace.setSpan(ROOT_CONTEXT, parent) : parent;
  return tracer().startSpan(name, rest, context);
}

/**
 * Runs `work` in a child span of `parent` that ends when the work settles, marked as an error
 * when it throws. Without tracing, just runs it.
 */
export async function inSpan<T>(name: string, parent: Span | undefined, attributes: Attributes, work: (span: Span | undefined) => Promise<T>): Promise<T> {
  const span = startSpan(name, { attributes, parent });
  if (!span) return work(undefined);
  try {
    return await work(span);
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
 * The trace and span id of a sampled span, for a log line or a histogram exemplar; empty when there
 * is none, so callers can spread it unconditionally.
 */
export function traceIds(span: Span | undefined): { trace_id: string; span_id: string } | Record<string, never> {
  if (!span) return noIds;
  const sc = span.spanContext();
  return isSampled(sc) ? { trace_id: sc.traceId, span_id: sc.spanId } : noIds;
}

/** Shared, so every observation of an untraced histogram sample allocates nothing for it. */
const noIds: Record<string, never> = Object.freeze({});
