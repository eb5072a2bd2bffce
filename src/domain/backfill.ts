/**
 * What a backfill may ask for, checked before any row is read. Pure: the caller passes the clock.
 */
import type { Problem } from './errors.js';
import { windowOrderProblem } from './time-window.js';

/**
 * The most of its window's events a backfill reads, for each event it may take (REPLAY_MAX_LIMIT):
 * a window of millions would otherwise run into the statement timeout after seconds of the
 * database's time and answer 503; past this bound it is refused at once with where to split it.
 */
export const windowReadsPerEvent = 10;

export interface BackfillWindow {
  since: Date;
  until?: Date;
}

/** The clock a backfill's window is checked against: PostgreSQL's, as retention reads it. */
export interface BackfillClock {
  now: Date;
  /** Where RETENTION_DAYS begins now (db/functions/retention_cutoff.sql): retention drops each partition of events that ends before it. */
  retainedSince: Date;
  retentionDays: number;
}

/**
 * Every problem with a backfill's window: `since` must come before `until`, and must lie
 * inside RETENTION_DAYS, because older events are gone or being removed by retention, so a backfill
 * reaching further back would silently deliver only some of them.
 */
export function backfillWindowProblems(window: BackfillWindow, clock: BackfillClock): Problem[] {
  const problems: Problem[] = [];
  if (window.since < clock.retainedSince) {
    problems.push({
      path: 'since',
      message: `must be within RETENTION_DAYS (${clock.retentionDays} days): no earlier than ${clock.retainedSince.toISOString()}; older events are removed by retention`,
    });
  }
  if (window.since >= clock.now) problems.push({ path: 'since', message: 'must be in the past' });
  const order = windowOrderProblem(window.since, window.until);
  if (order) problems.push(order);
  return problems;
}
