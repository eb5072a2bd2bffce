/**
 * How stale a route's answer may be: the vocabulary of read routing (src/infra/read-replica.ts
 * decides, docs/api.md "Reads and replica lag" lists each route's choice).
 *
 * - `replica`: a listing, search, statistic or catalogue: served by the read replica while it is
 *   within READ_REPLICA_MAX_LAG_SECONDS of the primary.
 * - `replica-when-read-only`: a read by id. A caller who can write may have just written what it
 *   reads (GET after POST), so it reads the primary; a read-only portal link cannot have written
 *   anything, so it reads the replica.
 *
 * A route that declares neither reads the primary.
 */
export type ReadTolerance = 'replica' | 'replica-when-read-only';

/** Why a read that could have gone to the replica was served by the primary (a metric label). */
export const READ_FALLBACK_REASONS = ['lag', 'unreachable', 'error'] as const;
export type ReadFallbackReason = (typeof READ_FALLBACK_REASONS)[number];
