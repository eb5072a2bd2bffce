-- retention_cutoff: where a retention window of p_days days begins, by PostgreSQL's clock. The one
-- rule for it: retention removes what finished before it (src/ops/retention.ts reads its cutoffs
-- here), a replay takes only what finished after it (src/store/replays-store.ts), and a backfill
-- reaches no event made before it (src/api/routes/endpoint-backfill.ts). One clock and one
-- arithmetic, so a process whose clock runs ahead or behind, or a session in a time zone with
-- daylight saving, cannot remove what a replay or a backfill still takes.
--
-- Inputs:  p_days (RETENTION_DAYS, DEAD_LETTER_RETENTION_DAYS or AUDIT_RETENTION_DAYS).
-- Outputs: now() minus p_days days of 24 hours.
CREATE OR REPLACE FUNCTION retention_cutoff(p_days integer) RETURNS timestamptz
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT now() - make_interval(secs => p_days * 86400.0)
$$;
