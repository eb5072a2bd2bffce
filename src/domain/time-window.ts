/**
 * A time window [since, until), as listings, statistics, replays and backfills take one. Pure.
 */
import type { Problem } from './errors.js';

/**
 * A window whose `since` is not before its `until` holds nothing. Every route that takes a window
 * refuses one, so a swapped pair is an error to fix, not an empty page to puzzle over.
 */
export function windowOrderProblem(since: Date | undefined, until: Date | undefined): Problem | undefined {
  return since instanceof Date && until instanceof Date && since >= until ? { path: 'since', message: 'must be before until' } : undefined;
}
