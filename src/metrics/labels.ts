/**
 * The metrics' vocabulary: label values (bounded, from the contract), metric names and histogram
 * buckets. registry.ts defines the metrics over them and re-exports all of this.
 */
import { ATTEMPT_OUTCOMES, DEAD_LETTER_REASONS, type AttemptOutcome, type DeadLetterReason } from '../domain/delivery-status.js';
import { INTAKE_OUTCOMES } from '../domain/events.js';
import { READ_FALLBACK_REASONS, type ReadFallbackReason } from '../domain/read-consistency.js';
import { PROXY_FAILURE_REASONS, type ProxyFailureReason } from '../domain/retry-policy.js';
import { RETAINED_TABLES, type RetainedTable } from '../domain/retention.js';
import { SOURCE_TYPES, type SourceType } from '../domain/sources.js';

// ---------------------------------------------------------------------------------------------
// Label values (bounded, from the contract)
// ---------------------------------------------------------------------------------------------

/** Defined in domain/; re-exported because these lists are the metrics' label sets. */
export { ATTEMPT_OUTCOMES, DEAD_LETTER_REASONS, READ_FALLBACK_REASONS, SOURCE_TYPES, type AttemptOutcome, type DeadLetterReason, type ReadFallbackReason, type SourceType };

/**
 * Outcome of one inbound callback (one link of the provider retry chain).
 * A body over the size limit (413) counts as `rejected_malformed`; a storage outage (503) as
 * `unavailable`. Requests naming no known source (404) belong to no provider chain and are not
 * counted here.
 */
export const RECEIPT_OUTCOMES = [
  ...INTAKE_OUTCOMES,
  'rejected_signature',
  'rejected_malformed',
  'unavailable',
] as const;
export type ReceiptOutcome = (typeof RECEIPT_OUTCOMES)[number];

/** HTTP status class of an attempt's response; `network` when no HTTP response was received. */
export const STATUS_CLASSES = ['2xx', '3xx', '4xx', '5xx', 'network'] as const;
export type StatusClass = (typeof STATUS_CLASSES)[number];

/** `admitted`: an admission round put deliveries in flight or queued them; `empty`: it found nothing it could start. */
export const ADMISSION_ROUND_OUTCOMES = ['admitted', 'empty'] as const;
export type AdmissionRoundOutcome = (typeof ADMISSION_ROUND_OUTCOMES)[number];

/** `single`: POST /v1/deliveries/:id/replay; `bulk`: one count per delivery replayed by POST /v1/replays. */
export const REPLAY_KINDS = ['single', 'bulk'] as const;
export type ReplayKind = (typeof REPLAY_KINDS)[number];

export const RECONCILE_OUTCOMES = ['changed', 'unchanged', 'provider_error', 'invalid_response'] as const;
export type ReconcileOutcome = (typeof RECONCILE_OUTCOMES)[number];

/** Metric names, exported so tests, dashboards checks and docs refer to one spelling. */
export const METRIC_NAMES = {
  inboundReceipts: 'webhook_inbound_receipts_total',
  inboundAck: 'webhook_inbound_ack_seconds',
  reconcilePolls: 'webhook_reconcile_polls_total',
  deliveryAttempts: 'webhook_delivery_attempts_total',
  attemptDuration: 'webhook_attempt_duration_seconds',
  deliveryLatency: 'webhook_delivery_latency_seconds',
  firstAttemptDelay: 'webhook_first_attempt_delay_seconds',
  deadLettered: 'webhook_deliveries_dead_lettered_total',
  replays: 'webhook_replays_total',
  dispatchBacklog: 'webhook_dispatch_backlog',
  deadLetterDeliveries: 'webhook_dead_letter_deliveries',
  oldestPendingAge: 'webhook_oldest_pending_age_seconds',
  openCircuits: 'webhook_open_circuits',
  pausedEndpoints: 'webhook_endpoints_paused',
  retentionRemoved: 'webhook_retention_removed_total',
  egressProxyFailures: 'webhook_egress_proxy_failures_total',
  readReplicaLag: 'webhook_read_replica_lag_seconds',
  readFallbacks: 'webhook_read_fallbacks_total',
  backlogPace: 'webhook_backlog_paced_per_second',
  admissionRounds: 'webhook_admission_rounds_total',
} as const;

// ---------------------------------------------------------------------------------------------
// Buckets: each histogram's buckets cover the range its value actually lives in.
// ---------------------------------------------------------------------------------------------

/** Intake acknowledges within milliseconds; above 2.5 s providers start timing out. */
export const ACK_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
/** One outbound HTTP try: fast receivers answer in ms, the attempt timeout caps it near a minute. */
export const ATTEMPT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Accepted → first success: immediate in the good case, hours when retries back off; up to a day. */
export const DELIVERY_LATENCY_BUCKETS = [
  0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 43200,
  86400,
];

/**
 * Accepted → first attempt starts: the delivery-latency objective counts the share under 5 s, so 5
 * must be a bucket boundary; above it the buckets only say how late.
 */
export const FIRST_ATTEMPT_DELAY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
