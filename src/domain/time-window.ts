/**
 * A time window [since, until), as listings, statistics, replays and backfills take one. Pure.
 */
import type { Problem } from './errors.js';

/**
 * A window whose `since` is after its `until` was swapped by mistake: every route that takes a
 * window refuses one, so it is an error to fix, not an empty page to puzzle over. A window whose
 * two ends are equal is empty, and answered as such (the portal's search sends one while a person
 * narrows it down).
 */
export function windowOrderProblem(since: Date | undefined, until: Date | undefined): Problem | undefined {
  return since instanceof Date && until instanceof Date && since > until ? { path: 'since', message: 'must not be after until' } : undefined;
}
