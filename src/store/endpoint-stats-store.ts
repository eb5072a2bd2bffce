import { uuidOf } from '../domain/ids.js';
import { uuidFloor } from '../domain/retention.js';
import type { TenantScope } from './tenant-scope.js';

export interface StatsWindow {
  since: Date;
  until: Date;
  /**
   * How long before `since` a delivery may have been made (or replayed) and still be attempted in
   * the window: the longest maximum event age in force for the endpoint.
   */
  lookbackSeconds: number;
}

export interface EndpointStats {
  since: string;
  until: string;
  attempts: number;
  succeeded: number;
  failed: number;
  byStatusClass: { '2xx': number; '3xx': number; '4xx': number; '5xx': number; network: number };
  latencyMs: { p50: number | null; p95: number | null; p99: number | null };
  series: StatsBucket[];
}

/** One hour of the window: its attempts, how many failed, and their latency (null with no attempts). */
export interface StatsBucket {
  start: string;
  attempts: number;
  failed: number;
  latencyMs: { p50: number | null; p95: number | null };
}

const hourMs = 3_600_000;

/**
 * Attempts of one endpoint's deliveries that started in [since, until).
 *
 * Attempts are partitioned by delivery id and carry no endpoint, so the deliveries come first, from
 * deliveries_endpoint (endpoint_id, id): a delivery id says when it was made, and a delivery is
 * attempted only until its deadline (made + maximum event age), so only ids made from
 * `since - lookback` up to `until` can have attempts in the window; those made earlier and replayed
 * since come from deliveries_replayed (migration 20261201000020). Each delivery's attempts are then
 * read through their index on delivery_id, in the partition of that id only (delivery_attempts).
 */
export async function endpointStats(scope: TenantScope, endpointId: string, w: StatsWindow): Promise<EndpointStats> {
  const from = new Date(w.since.getTime() - w.lookbackSeconds * 1000);
  const bounds = {
    lo: uuidFloor(from),
    // A delivery made in the same millisecond as `until` sorts above the floor; one ms more covers it.
    hi: uuidFloor(new Date(w.until.getTime() + 1)),
    since: w.since,
    until: w.until,
  };
  // Through TenantScope, so a portal session limited to some event types counts only theirs.
  const endpoint = uuidOf('endpoint', endpointId);
  const made = scope.from('deliveries').where('deliveries.endpoint_id', endpoint).where('deliveries.id', '>=', bounds.lo).where('deliveries.id', '<', bounds.hi);
  const replayed = scope.from('deliveries').where('deliveries.endpoint_id', endpoint).where('deliveries.replayed_at', '>=', from).where('deliveries.id', '<', bounds.lo);
  const deliveries = made.select('deliveries.id').union(replayed.select('deliveries.id'));
  // Composed, not built: the builder cannot read the MATERIALIZED CTE twice (totals and series),
  // nor join LATERAL. Each delivery's attempts, stored or folded into it (delivery_attempts).
  const totals = (
    await scope.composed<Record<string, unknown>>(
    `WITH d AS (:deliveries),
          a AS MATERIALIZED (
            SELECT a.started_at, a.duration_ms, a.status_code, a.outcome
              FROM d CROSS JOIN LATERAL delivery_attempts(d.id) a
             WHERE a.started_at >= :since AND a.started_at < :until)
       SELECT count(*)::int AS attempts,
              count(*) FILTER (WHERE outcome = 'success')::int AS succeeded,
              count(*) FILTER (WHERE status_code BETWEEN 200 AND 299)::int AS c2,
              count(*) FILTER (WHERE status_code BETWEEN 300 AND 399)::int AS c3,
              count(*) FILTER (WHERE status_code BETWEEN 400 AND 499)::int AS c4,
              count(*) FILTER (WHERE status_code >= 500)::int AS c5,
              count(*) FILTER (WHERE status_code IS NULL)::int AS network,
              percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
              percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95,
              percentile_cont(0.99) WITHIN GROUP (ORDER BY duration_ms) AS p99,
              coalesce((SELECT json_agg(h ORDER BY h.hour) FROM (
                SELECT date_trunc('hour', started_at, 'UTC') AS hour, count(*)::int AS attempts,
                       count(*) FILTER (WHERE outcome <> 'success')::int AS failed,
                       percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50,
                       percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95
                  FROM a GROUP BY 1) h), '[]') AS series
         FROM a`,
      { deliveries, since: bounds.since, until: bounds.until },
    )
  )[0]!;
  const n = (v: unknown) => Number(v);
  const ms = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v) * 10) / 10);
  const byHour = new Map<number, Omit<StatsBucket, 'start'>>();
  for (const h of totals.series as { hour: string; attempts: number; failed: number; p50: number | null; p95: number | null }[]) {
    byHour.set(new Date(h.hour).getTime(), { attempts: h.attempts, failed: h.failed, latencyMs: { p50: ms(h.p50), p95: ms(h.p95) } });
  }
  // Every hour of the window is present, so a chart needs no gap filling.
  const series: StatsBucket[] = [];
  for (let t = Math.floor(w.since.getTime() / hourMs) * hourMs; t < w.until.getTime(); t += hourMs) {
    series.push({ start: new Date(t).toISOString(), ...(byHour.get(t) ?? { attempts: 0, failed: 0, latencyMs: { p50: null, p95: null } }) });
  }
  return {
    since: w.since.toISOString(),
    until: w.until.toISOString(),
    attempts: n(totals.attempts),
    succeeded: n(totals.succeeded),
    failed: n(totals.attempts) - n(totals.succeeded),
    byStatusClass: { '2xx': n(totals.c2), '3xx': n(totals.c3), '4xx': n(totals.c4), '5xx': n(totals.c5), network: n(totals.network) },
    latencyMs: { p50: ms(totals.p50), p95: ms(totals.p95), p99: ms(totals.p99) },
    series,
  };
}
