/**
 * The delivery-latency objective (docs/runbook.md, "Service level objectives"): 99 % of first
 * attempts start within FIRST_ATTEMPT_OBJECTIVE_SECONDS of the event's acceptance, for endpoints
 * that are up. Pure: the endpoint's state and the clock are passed in.
 */
import { circuitView } from './circuit.js';

/** A bucket boundary of webhook_first_attempt_delay_seconds, so the good share is exact. */
export const FIRST_ATTEMPT_OBJECTIVE_SECONDS = 5;

export interface HeldState {
  /** When the endpoint last took back work it had been kept from (migration 20261202000039). */
  releasedAt: Date | null;
  consecutiveFailures: number;
  circuitOpenUntil: Date | null;
}

/** A first attempt that started within the objective: it counts, whatever its endpoint's state. */
export function startedOnTime(delaySeconds: number): boolean {
  return delaySeconds <= FIRST_ATTEMPT_OBJECTIVE_SECONDS;
}

/**
 * Whether a first attempt that started `delaySeconds` after its event's acceptance counts toward
 * the objective. An attempt on time always counts. A late one counts only if its endpoint was up
 * the whole time the event waited: not held now (circuit open or half-open), and not released
 * since the event was accepted (resumed, re-enabled, circuit closed, new URL, backfilled): then it
 * waited for the endpoint, and the platform's lateness is not what it measures.
 */
export function countsTowardLatencyObjective(
  delaySeconds: number,
  acceptedAt: Date,
  endpoint: HeldState,
  circuitThreshold: number,
  now: Date,
): boolean {
  if (startedOnTime(delaySeconds)) return true;
  const circuit = circuitView({ consecutiveFailures: endpoint.consecutiveFailures, openUntil: endpoint.circuitOpenUntil }, circuitThreshold, now);
  if (circuit.state !== 'closed') return false;
  return endpoint.releasedAt === null || endpoint.releasedAt <= acceptedAt;
}
