/**
 * The snapshot behind the global gauges: one injected read of PostgreSQL, cached briefly and shared
 * by every gauge and overlapping scrape (registry.ts defines the gauges over it).
 */
import { within } from '../infra/within.js';

/** What the injected source reports; every value is global (all tenants, all processes). */
export interface BacklogSnapshot {
  /** Deliveries pending or scheduled for a retry (not yet succeeded, not dead). */
  backlog: number;
  /** Deliveries currently in the dead-letter state (falls when they are replayed). */
  deadLetters: number;
  /**
   * How long the oldest delivery that is due (pending, next attempt time <= now) has been waiting
   * since it became due, in seconds; 0 when nothing is due. Deliveries waiting in a retry backoff
   * are not late, so they do not count: this measures whether dispatch keeps up.
   */
  oldestPendingAgeSeconds: number;
  /** Endpoints whose circuit breaker is currently open. */
  openCircuits: number;
  /** Endpoints a tenant has paused (not deleted). */
  pausedEndpoints: number;
}
export type BacklogSource = () => Promise<BacklogSnapshot>;

export interface BacklogSourceOptions {
  /** How long one snapshot is reused; scrapes inside this window share one query. Default 2000. */
  ttlMs?: number;
  /**
   * A read taking longer than this counts as failed (default 3000), so a hung query cannot block
   * every later scrape that would otherwise wait on the same in-flight read.
   */
  timeoutMs?: number;
  /** Called when the source throws or times out; the gauges keep their last values. */
  onError?: (error: unknown) => void;
}

export const DEFAULT_BACKLOG_TTL_MS = 2_000;
export const DEFAULT_BACKLOG_TIMEOUT_MS = 3_000;

let backlogSource: BacklogSource | undefined;
let backlogOptions: BacklogSourceOptions & { ttlMs: number; timeoutMs: number } = {
  ttlMs: DEFAULT_BACKLOG_TTL_MS,
  timeoutMs: DEFAULT_BACKLOG_TIMEOUT_MS,
};
let lastSnapshot: { at: number; value: BacklogSnapshot } | undefined;
let inflight: Promise<BacklogSnapshot | undefined> | undefined;

/**
 * Inject the function that reads the global gauges from PostgreSQL. Until one is set the gauges
 * report 0. Replacing the source drops the cached snapshot.
 */
export function setBacklogSource(fn: BacklogSource | undefined, options: BacklogSourceOptions = {}): void {
  backlogSource = fn;
  backlogOptions = {
    ...options,
    ttlMs: options.ttlMs ?? DEFAULT_BACKLOG_TTL_MS,
    timeoutMs: options.timeoutMs ?? DEFAULT_BACKLOG_TIMEOUT_MS,
  };
  lastSnapshot = undefined;
  inflight = undefined;
}

/**
 * The current snapshot: cached for the TTL; concurrent callers (the four gauges of one scrape, or
 * overlapping scrapes) share one in-flight query. A failing source yields the last good snapshot,
 * and a failed read is not cached so the next scrape tries again.
 */
export async function readSnapshot(): Promise<BacklogSnapshot | undefined> {
  const source = backlogSource;
  if (!source) return undefined;
  if (lastSnapshot && Date.now() - lastSnapshot.at < backlogOptions.ttlMs) return lastSnapshot.value;
  if (inflight) return inflight;
  const { onError, timeoutMs } = backlogOptions;
  // Started from a resolved promise so even a source that throws synchronously settles here.
  const current: Promise<BacklogSnapshot | undefined> = within(timeoutMs, Promise.resolve().then(source), 'metrics backlog source')
    .then(
      (value) => {
        // Ignore a result that arrives after the source was replaced.
        if (backlogSource === source) lastSnapshot = { at: Date.now(), value };
        return value;
      },
      (error: unknown) => {
        onError?.(error);
        return lastSnapshot?.value;
      },
    )
    .finally(() => {
      if (inflight === current) inflight = undefined;
    });
  inflight = current;
  return current;
}
