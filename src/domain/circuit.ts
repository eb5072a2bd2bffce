/**
 * The circuit breaker as a tenant sees it, read from what dispatch stores on the endpoint row
 * (`consecutive_failures`, `circuit_open_until`; written by
 * db/functions/endpoint_health_after_attempts.sql, obeyed by db/functions/endpoint_room.sql).
 * Pure: the clock is passed in.
 *
 * - `open`: `circuit_open_until` is in the future. Admission sends nothing to the endpoint.
 * - `half_open`: the cooldown has passed (or was never set) but the failures that opened the
 *   circuit have not been cleared: `consecutive_failures` >= CIRCUIT_FAILURE_THRESHOLD. Admission
 *   lets one probe through at a time; its success closes the circuit, its failure opens it again.
 * - `closed`: anything else.
 */
export const CIRCUIT_STATES = ['closed', 'open', 'half_open'] as const;
export type CircuitState = (typeof CIRCUIT_STATES)[number];

export interface CircuitView {
  state: CircuitState;
  /** When an open circuit lets its probe through; null unless open. */
  openUntil: string | null;
  consecutiveFailures: number;
}

export function circuitView(stored: { consecutiveFailures: number; openUntil: Date | null }, threshold: number, now: Date): CircuitView {
  const { consecutiveFailures, openUntil } = stored;
  if (openUntil && openUntil.getTime() > now.getTime()) return { state: 'open', openUntil: openUntil.toISOString(), consecutiveFailures };
  return { state: consecutiveFailures >= threshold ? 'half_open' : 'closed', openUntil: null, consecutiveFailures };
}
