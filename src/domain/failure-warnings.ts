/**
 * Warnings before an auto-disable (`platform.endpoint.failing`): how far into
 * AUTO_DISABLE_AFTER_SECONDS a failure streak is announced. Stored as whole percents so the
 * comparison in SQL is exact; published as shares (0.5, 0.75, 0.9).
 */
export const FAILURE_WARNING_PERCENTS = [50, 75, 90] as const;

/** The share of the window a stored percent stands for, as the event and the API show it. */
export const shareOf = (percent: number): number => percent / 100;

/**
 * The thresholds to announce, in order: every one the streak has reached (`reachedPercent`) that
 * was not announced yet (above `warnedPercent`). A sweep that first sees a streak already past 75 %
 * announces 0.5 and then 0.75, so a subscriber never misses a step.
 */
export function thresholdsToAnnounce(warnedPercent: number | null, reachedPercent: number): number[] {
  return FAILURE_WARNING_PERCENTS.filter((p) => p > (warnedPercent ?? 0) && p <= reachedPercent).map(shareOf);
}

/** An endpoint's failure streak as a tenant reads it on the endpoint (`health`). */
export interface HealthView {
  /** When the current failure streak began; null while the endpoint is healthy. */
  failingSince: string | null;
  /** The highest threshold announced in this streak (0.5, 0.75, 0.9); null before the first. */
  warnedThreshold: number | null;
  /** When the platform disables the endpoint if no delivery succeeds before; null while healthy. */
  autoDisableAt: string | null;
}

export function healthView(stored: { failingSince: Date | null; warnedPercent: number | null }, autoDisableAfterSeconds: number): HealthView {
  const { failingSince, warnedPercent } = stored;
  if (!failingSince) return { failingSince: null, warnedThreshold: null, autoDisableAt: null };
  return {
    failingSince: failingSince.toISOString(),
    warnedThreshold: warnedPercent === null ? null : shareOf(warnedPercent),
    autoDisableAt: new Date(failingSince.getTime() + autoDisableAfterSeconds * 1000).toISOString(),
  };
}
