/**
 * Every PostgreSQL advisory lock the platform takes, by purpose. The keys differ, so no holder of
 * one ever waits for the holder of another: retention and `migrate` once shared 727004, and an
 * upgrade's `migrate` waited for an hourly retention run to finish before its process could start.
 * Keys taken in SQL are written there as literals; test/unit/advisory-locks.test.ts checks that
 * every literal in src/ and db/functions/ is one of these.
 */
export const advisoryLocks = {
  /** With uuid_hash(endpoint id), two-argument: an admission round's claim of an endpoint (db/functions/admit_due_v4.sql). */
  admissionEndpoint: 727_002,
  /** Creating partitions ahead (db/functions/ensure_time_partitions_v2.sql, and the release before's ensure_time_partitions.sql). */
  partitionUpkeep: 727_003,
  /** `migrate` applying function sources (src/infra/function-sources.ts). */
  functionSources: 727_004,
  /** With hashtext(endpoint id), two-argument: backfills of one endpoint take turns (src/store/backfill-store.ts). */
  backfillEndpoint: 727_005,
  /** Retention's check of a partition of events until the watermark passes it, shared by backfills (src/store/retention-store.ts). */
  eventDays: 727_006,
  /** One retention run at a time over all processes (src/ops/retention.ts). */
  retentionRun: 727_007,
} as const;
