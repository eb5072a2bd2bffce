/**
 * Every Prometheus metric the relay exposes, defined in one place.
 *
 * Names, label names and label values are part of the external contract (CONTRACT.md, "Metrics"):
 * dashboards and alert rules in grafana/ depend on them, so they are spelled out here once and the
 * rest of the code records through the typed wrappers in `metrics`. Label values are TypeScript
 * string unions, so recording a label value that is not in the contract is a compile error, and no
 * label can carry an unbounded value (ids, URLs, tenant names).
 *
 * Two kinds of metrics live here:
 * - per-process counters and histograms (what *this* process did); dashboards `sum()` them over
 *   instances;
 * - global gauges (backlog, dead letters, oldest due delivery, open circuits, paused endpoints) computed from
 *   PostgreSQL, the source of truth. Every process reports the same value, so dashboards and alerts
 *   must aggregate them with `max()`, never `sum()`.
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { traceIds, type Span } from '../infra/tracing.js';
import { ATTEMPT_OUTCOMES, DEAD_LETTER_REASONS, type AttemptOutcome, type DeadLetterReason } from '../domain/delivery-status.js';
import { INTAKE_OUTCOMES } from '../domain/events.js';
import { READ_FALLBACK_REASONS, type ReadFallbackReason } from '../domain/read-consistency.js';
import { PROXY_FAILURE_REASONS, type ProxyFailureReason } from '../domain/retry-policy.js';
import { RETAINED_TABLES, type RetainedTable } from '../domain/retention.js';
import { SOURCE_TYPES, type SourceType } from '../domain/sources.js';
import { acceptsOpenMetrics, openMetricsText } from './exposition.js';
import { readSnapshot, type BacklogSnapshot } from './backlog-snapshot.js';
import { RECEIPT_OUTCOMES, type ReceiptOutcome, STATUS_CLASSES, type StatusClass, REPLAY_KINDS, type ReplayKind, ADMISSION_ROUND_OUTCOMES, type AdmissionRoundOutcome, RECONCILE_OUTCOMES, type ReconcileOutcome, METRIC_NAMES, ACK_BUCKETS, ATTEMPT_BUCKETS, DELIVERY_LATENCY_BUCKETS, FIRST_ATTEMPT_DELAY_BUCKETS } from './labels.js';

/** The label values, names and buckets, for code that records or reads a metric. */
export * from './labels.js';
/** The global gauges' source, which platform.ts injects. */
export * from './backlog-snapshot.js';

// ---------------------------------------------------------------------------------------------
// Registry
// ---------------------------------------------------------------------------------------------

/** The relay's own registry (not prom-client's global one), served on GET /metrics. */
export const registry = new Registry();
collectDefaultMetrics({ register: registry });
// prom-client names these three gauges with a `_total` suffix, which `promtool check metrics`
// rejects (the suffix promises a counter). They are the sums of `nodejs_active_handles`,
// `nodejs_active_requests` and `nodejs_active_resources`, which stay, so nothing is lost.
for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total']) {
  registry.removeSingleMetric(name);
}

/**
 * The latency histograms carry exemplars (the trace and span id of a sampled observation), shown when
 * Prometheus asks for OpenMetrics (src/metrics/exposition.ts). prom-client refuses exemplars on a
 * metric constructed into a Prometheus-format registry, so these are registered by hand instead.
 */
const withExemplars = { enableExemplars: true, registers: [] as Registry[] };

const inboundReceiptsCounter = new Counter({
  name: METRIC_NAMES.inboundReceipts,
  help: 'Inbound provider callbacks (receipts) by source type and outcome: the provider retry chain.',
  labelNames: ['source_type', 'outcome'] as const,
  registers: [registry],
});

const inboundAckHistogram = new Histogram({
  name: METRIC_NAMES.inboundAck,
  help: 'Time from an inbound callback arriving to its response being sent, in seconds.',
  labelNames: ['source_type', 'outcome'] as const,
  buckets: ACK_BUCKETS,
  ...withExemplars,
});
registry.registerMetric(inboundAckHistogram);

const reconcilePollsCounter = new Counter({
  name: METRIC_NAMES.reconcilePolls,
  help: 'Reconciliation polls of a provider for messages left in a non-final status, by outcome.',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

const deliveryAttemptsCounter = new Counter({
  name: METRIC_NAMES.deliveryAttempts,
  help: 'Outbound delivery attempts by outcome and HTTP status class: the platform retry chain.',
  labelNames: ['outcome', 'status_class'] as const,
  registers: [registry],
});

const attemptDurationHistogram = new Histogram({
  name: METRIC_NAMES.attemptDuration,
  help: 'Duration of one outbound HTTP attempt, in seconds, by status class.',
  labelNames: ['status_class'] as const,
  buckets: ATTEMPT_BUCKETS,
  ...withExemplars,
});
registry.registerMetric(attemptDurationHistogram);

const deliveryLatencyHistogram = new Histogram({
  name: METRIC_NAMES.deliveryLatency,
  help: 'Time from an event being accepted to its first successful attempt to an endpoint, in seconds.',
  buckets: DELIVERY_LATENCY_BUCKETS,
  ...withExemplars,
});
registry.registerMetric(deliveryLatencyHistogram);

const firstAttemptDelayHistogram = new Histogram({
  name: METRIC_NAMES.firstAttemptDelay,
  help: 'Time from an event being accepted to the start of the first attempt of one of its deliveries, in seconds; a late one whose endpoint held it back (paused, circuit open, backfilled) is left out.',
  buckets: FIRST_ATTEMPT_DELAY_BUCKETS,
  ...withExemplars,
});
registry.registerMetric(firstAttemptDelayHistogram);

const deadLetteredCounter = new Counter({
  name: METRIC_NAMES.deadLettered,
  help: 'Deliveries moved to the dead-letter state, by reason.',
  labelNames: ['reason'] as const,
  registers: [registry],
});

const replaysCounter = new Counter({
  name: METRIC_NAMES.replays,
  help: 'Deliveries replayed by an operator or tenant, by kind (single or bulk).',
  labelNames: ['kind'] as const,
  registers: [registry],
});

const retentionRemovedCounter = new Counter({
  name: METRIC_NAMES.retentionRemoved,
  help: 'Rows removed by retention, by table (dropped partitions count their rows).',
  labelNames: ['table'] as const,
  registers: [registry],
});

const egressProxyFailuresCounter = new Counter({
  name: METRIC_NAMES.egressProxyFailures,
  help: 'Outbound requests that failed at the egress proxy itself (not counted as attempts), by reason.',
  labelNames: ['reason'] as const,
  registers: [registry],
});

const readFallbacksCounter = new Counter({
  name: METRIC_NAMES.readFallbacks,
  help: 'Reads meant for the read replica that the primary served instead, by reason (lag, unreachable, error).',
  labelNames: ['reason'] as const,
  registers: [registry],
});

const readReplicaLagGauge = new Gauge({
  name: METRIC_NAMES.readReplicaLag,
  help: "Seconds since the oldest primary WAL position this process saw that the read replica has not replayed (0 when caught up). Per process: aggregate with max().",
  registers: [registry],
});

const admissionRoundsCounter = new Counter({
  name: METRIC_NAMES.admissionRounds,
  help: "This worker's admission rounds, by whether they admitted anything. Empty rounds are the scheduler's overhead: a high rate of them costs PostgreSQL and worker CPU for nothing.",
  labelNames: ['outcome'] as const,
  registers: [registry],
});

/** This process's backlog pacing, read at each scrape (src/outbound/backlog-pacing.ts); none in the api role. */
let backlogPaceSource: (() => number) | undefined;
new Gauge({
  name: METRIC_NAMES.backlogPace,
  help: 'Late first attempts per second this worker allows while live work waits longer than usual (0: not paced). Per process.',
  registers: [registry],
  collect() {
    this.set(backlogPaceSource?.() ?? 0);
  },
});

// ---------------------------------------------------------------------------------------------
// Global gauges, computed from PostgreSQL
// ---------------------------------------------------------------------------------------------

function globalGauge(name: string, help: string, pick: (s: BacklogSnapshot) => number): Gauge {
  return new Gauge({
    name,
    help: `${help} Global value from PostgreSQL, identical on every instance: aggregate with max().`,
    registers: [registry],
    async collect() {
      const snapshot = await readSnapshot();
      if (snapshot) this.set(pick(snapshot));
    },
  });
}

globalGauge(METRIC_NAMES.dispatchBacklog, 'Deliveries pending or scheduled for retry.', (s) => s.backlog);
globalGauge(METRIC_NAMES.deadLetterDeliveries, 'Deliveries currently dead-lettered.', (s) => s.deadLetters);
globalGauge(
  METRIC_NAMES.oldestPendingAge,
  'Seconds the oldest due delivery has waited since it became due (0 when none).',
  (s) => s.oldestPendingAgeSeconds,
);
globalGauge(METRIC_NAMES.openCircuits, 'Endpoints whose circuit breaker is open.', (s) => s.openCircuits);
globalGauge(METRIC_NAMES.pausedEndpoints, 'Endpoints paused by their tenant (their work waits).', (s) => s.pausedEndpoints);

// ---------------------------------------------------------------------------------------------
// Typed recording API
// ---------------------------------------------------------------------------------------------

export interface TypedCounter<L> {
  inc(labels: L, value?: number): void;
}
export interface TypedHistogram<L> {
  /** With `span`'s trace and span id as the exemplar, when it is sampled. */
  observe(labels: L, seconds: number, span?: Span): void;
  /** Starts a timer; call the result with the labels (known only at the end) to record it. */
  startTimer(): (labels: L) => number;
}

function typedCounter<L extends Record<string, string>>(counter: Counter<string>): TypedCounter<L> {
  return { inc: (labels, value = 1) => counter.inc(labels, value) };
}

function elapsedSince(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function typedHistogram<L extends Record<string, string>>(histogram: Histogram<string>): TypedHistogram<L> {
  return {
    observe: (labels, seconds, span) => histogram.observe({ labels, value: seconds, exemplarLabels: traceIds(span) }),
    startTimer: () => {
      const start = process.hrtime.bigint();
      return (labels) => {
        const seconds = elapsedSince(start);
        histogram.observe({ labels, value: seconds, exemplarLabels: {} });
        return seconds;
      };
    },
  };
}

export const metrics = {
  /** Provider chain: one count per inbound callback. */
  inboundReceipts: typedCounter<{ source_type: SourceType; outcome: ReceiptOutcome }>(inboundReceiptsCounter),
  /** Provider chain: request in → response out. */
  inboundAck: typedHistogram<{ source_type: SourceType; outcome: ReceiptOutcome }>(inboundAckHistogram),
  /** Provider chain: reconciliation polls (momo-communication sources with `reconcile`). */
  reconcilePolls: typedCounter<{ outcome: ReconcileOutcome }>(reconcilePollsCounter),
  /** Platform chain: one count per outbound attempt; use `statusClass(code)` for status_class. */
  deliveryAttempts: typedCounter<{ outcome: AttemptOutcome; status_class: StatusClass }>(deliveryAttemptsCounter),
  /** Platform chain: one outbound HTTP try. */
  attemptDuration: typedHistogram<{ status_class: StatusClass }>(attemptDurationHistogram),
  /** Platform chain: event accepted → first successful attempt to an endpoint. */
  deliveryLatency: {
    observe: (seconds: number, span?: Span): void => deliveryLatencyHistogram.observe({ value: seconds, exemplarLabels: traceIds(span) }),
  },
  /** Platform chain: event accepted → first attempt of a delivery starts (the delivery-latency SLI). */
  firstAttemptDelay: {
    observe: (seconds: number, span?: Span): void => firstAttemptDelayHistogram.observe({ value: seconds, exemplarLabels: traceIds(span) }),
  },
  deadLettered: typedCounter<{ reason: DeadLetterReason }>(deadLetteredCounter),
  replays: typedCounter<{ kind: ReplayKind }>(replaysCounter),
  retentionRemoved: typedCounter<{ table: RetainedTable }>(retentionRemovedCounter),
  /** The egress proxy failed before a target answered (src/outbound/egress-proxy.ts). */
  egressProxyFailures: typedCounter<{ reason: ProxyFailureReason }>(egressProxyFailuresCounter),
  /** A read that tolerates lag went to the primary (src/infra/read-replica.ts). */
  readFallbacks: typedCounter<{ reason: ReadFallbackReason }>(readFallbacksCounter),
  readReplicaLag: { set: (seconds: number): void => readReplicaLagGauge.set(seconds) },
  /** One admission round of this worker (src/outbound/admission-loop.ts). */
  admissionRounds: typedCounter<{ outcome: AdmissionRoundOutcome }>(admissionRoundsCounter),
  /** Late work's pace in this worker (src/outbound/backlog-pacing.ts), read when scraped; undefined: none. */
  backlogPace: { readFrom: (source: (() => number) | undefined): void => void (backlogPaceSource = source) },
} as const;

/**
 * Maps an HTTP status code to its class; anything that is not a status code of 200–599 (no
 * response: timeout, refused connection, DNS or TLS failure) is `network`.
 */
export function statusClass(statusCode?: number | null): StatusClass {
  if (statusCode === undefined || statusCode === null || !Number.isInteger(statusCode)) return 'network';
  if (statusCode >= 200 && statusCode < 300) return '2xx';
  if (statusCode >= 300 && statusCode < 400) return '3xx';
  if (statusCode >= 400 && statusCode < 500) return '4xx';
  if (statusCode >= 500 && statusCode < 600) return '5xx';
  return 'network';
}

// ---------------------------------------------------------------------------------------------
// Series initialisation
// ---------------------------------------------------------------------------------------------

/**
 * Creates every counter series at 0. Prometheus' rate() and increase() only see a change between
 * two samples, so a series that first appears already at 1 would hide its first event (the first
 * dead letter, the first signature failure) from alerts. All label sets are bounded, so this is cheap.
 */
function initialiseCounters(): void {
  for (const source_type of SOURCE_TYPES) {
    for (const outcome of RECEIPT_OUTCOMES) inboundReceiptsCounter.inc({ source_type, outcome }, 0);
  }
  for (const outcome of RECONCILE_OUTCOMES) reconcilePollsCounter.inc({ outcome }, 0);
  for (const outcome of ATTEMPT_OUTCOMES) {
    for (const status_class of STATUS_CLASSES) deliveryAttemptsCounter.inc({ outcome, status_class }, 0);
  }
  for (const reason of DEAD_LETTER_REASONS) deadLetteredCounter.inc({ reason }, 0);
  for (const kind of REPLAY_KINDS) replaysCounter.inc({ kind }, 0);
  for (const outcome of ADMISSION_ROUND_OUTCOMES) admissionRoundsCounter.inc({ outcome }, 0);
  for (const table of RETAINED_TABLES) retentionRemovedCounter.inc({ table }, 0);
  for (const reason of PROXY_FAILURE_REASONS) egressProxyFailuresCounter.inc({ reason }, 0);
  for (const reason of READ_FALLBACK_REASONS) readFallbacksCounter.inc({ reason }, 0);
}
initialiseCounters();

/** Resets every metric to its starting state (counters back to initialised zeros). For tests. */
export function resetMetrics(): void {
  registry.resetMetrics();
  initialiseCounters();
}

/**
 * The exposition text and its content type, for the GET /metrics handler: OpenMetrics, with
 * exemplars, when the scraper accepts it (Prometheus does), else the Prometheus text format.
 */
export async function renderMetrics(accept?: string): Promise<{ contentType: string; body: string }> {
  if (acceptsOpenMetrics(accept)) return { contentType: Registry.OPENMETRICS_CONTENT_TYPE, body: await openMetricsText(registry) };
  return { contentType: registry.contentType, body: await registry.metrics() };
}
