import type { Config } from '../../config/index.js';
import { circuitView } from '../../domain/circuit.js';
import { healthView } from '../../domain/failure-warnings.js';
import { resolvePolicy } from '../../domain/retry-policy.js';
import { rowToEndpoint, type EndpointRow } from '../../store/endpoints-store.js';

/** The retry policy dispatch applies to this endpoint: the platform defaults merged with its own. */
export function effectiveRetryPolicy(config: Config, row: EndpointRow) {
  return { ...resolvePolicy(config.retry, row.retry_policy), attemptTimeoutMs: config.attemptTimeoutMs };
}

/** What dispatch obeys now, beside what the tenant configured: the circuit, the failure streak and the merged policy. */
export function presentEndpoint(config: Config, row: EndpointRow, now = new Date()) {
  return {
    ...rowToEndpoint(row),
    circuit: circuitView({ consecutiveFailures: row.consecutive_failures, openUntil: row.circuit_open_until }, config.circuitFailureThreshold, now),
    health: healthView({ failingSince: row.failing_since, warnedPercent: row.failure_warned_percent }, config.autoDisableAfterSeconds),
    effectiveRetryPolicy: effectiveRetryPolicy(config, row),
  };
}
