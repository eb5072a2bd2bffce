/**
 * sweep: what leases and deadlines take back
 *   queued → pending            the job was lost with Redis (lease expired before a claim), or
 *                               Redis refused it (`unqueue`, at once)
 *   in_flight → pending | dead  the worker died mid-attempt (lease expired): a `worker_lost` attempt row,
 *                               the claim read from the queue row wherever it was written
 *   pending → dead              past its deadline (`max_age`, whatever its endpoint's status, a
 *                               paused one's included), or its endpoint is disabled
 *                               (`endpoint_disabled`) or deleted (`endpoint_deleted`); a paused
 *                               endpoint's work is held, never dead-lettered for the pause
 * (Endpoints failing for too long are disabled by ../endpoint-health.ts, in the same sweep.)
 *
 * Inputs: the default attempt budget. Outputs: counts and ids per
 * transition, for the lifecycle's side effects (metrics, operational events, a new admission round).
 */
import type { Knex } from 'knex';
import type { DeadLetterReason } from '../../domain/delivery-status.js';
import { idOfUuid, newStoredId, uuidOf } from '../../domain/ids.js';

export interface SweepLimits {
  defaultMaxAttempts: number;
  /** Endpoints failing continuously for longer are disabled (../endpoint-health.ts). */
  autoDisableAfterSeconds: number;
}

export interface SweepResult {
  requeued: number;
  lostInFlight: number;
  deadMaxAge: number;
  deadMaxAttempts: number;
  /** Deliveries this sweep dead-lettered for max_age or max_attempts (TypeIDs), for operational events. */
  deadIds: string[];
  deadDisabled: number;
  deadDeleted: number;
}

/**
 * Takes back what Redis or a worker lost, and dead-letters what can no longer be delivered. Every
 * statement is idempotent and row-locked, so any number of processes may sweep at once.
 */
export async function sweep(db: Knex, limits: SweepLimits, deadLettered: (reason: DeadLetterReason, count: number) => void = () => {}): Promise<SweepResult> {
  // Each step commits on its own; `deadLettered` hears of its dead letters at once, so a later
  // step's failure cannot lose their count.
  const told = (reason: DeadLetterReason, count: number) => count > 0 && deadLettered(reason, count);
  // Queued but never claimed within the lease: the job was lost with Redis. Admit it again.
  // Rows are found through delivery_queue (small, vacuumed often) and judged again on `deliveries`.
  const requeued = await db('deliveries')
    .whereIn('id', waitingIds(db, 'queued').where('lease_until', '<', db.fn.now()))
    .where('status', 'queued')
    .where('lease_until', '<', db.fn.now())
    .update({ status: 'pending', lease_until: null, updated_at: db.fn.now() });

  // Claimed by a worker that died mid-attempt: the attempt counts, its result is unknown, so it is
  // recorded as lost and the delivery is retried now (or dead if that was its last attempt).
  // The claim is the queue row's or the delivery's own (claim_in_queue): its attempt number becomes
  // the delivery's count. The attempt row keeps the lost attempt's own trigger (an initial attempt
  // stays `initial`) and its start, the claim's time (a claim in `deliveries` is its last write).
  // One transaction: the delivery is never back in line without its lost attempt on record.
  const lost = await db.transaction(async (trx) => {
    // Raw: the builder cannot write a data-modifying CTE that locks with SKIP LOCKED.
    const { rows: lost } = await trx.raw<{ rows: Array<{ id: string; attempt_count: number; lost_trigger: string; claimed_at: Date; status: string }> }>(
      `WITH lost AS (
         SELECT d.id, d.next_trigger AS lost_trigger, in_queue,
                CASE WHEN in_queue THEN q.claimed_at ELSE d.updated_at END AS claimed_at,
                CASE WHEN in_queue THEN q.attempt_count ELSE d.attempt_count END AS attempt_number
           FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
                CROSS JOIN LATERAL (SELECT claim_in_queue(d.status, d.attempt_count, q.status, q.attempt_count) AS in_queue) c
          -- Both rows locked, so both are judged again as they are now: a result recorded since the
          -- queue was read moved the delivery on, and an attempt given back (egress) left the
          -- delivery's row as the claim found it but its queue row pending.
          WHERE q.status = 'in_flight' AND q.lease_until < now() AND (in_queue OR (d.status = 'in_flight' AND d.lease_until < now()))
          FOR UPDATE OF d, q SKIP LOCKED
       )
       UPDATE deliveries d SET
         status = CASE WHEN lost.attempt_number - d.attempt_base >= COALESCE((ep.retry_policy->>'maxAttempts')::int, :defaultMaxAttempts) THEN 'dead' ELSE 'pending' END,
         dead_reason = CASE WHEN lost.attempt_number - d.attempt_base >= COALESCE((ep.retry_policy->>'maxAttempts')::int, :defaultMaxAttempts) THEN 'max_attempts' ELSE NULL END,
         attempt_count = lost.attempt_number,
         last_error = 'worker_lost: the attempt did not report back before its lease ended',
         next_attempt_at = now(), lease_until = NULL, updated_at = now(),
         next_trigger = 'retry'
        FROM lost, endpoints ep
       WHERE d.id = lost.id AND ep.id = d.endpoint_id
       RETURNING d.id, d.attempt_count, d.status, lost.lost_trigger, lost.claimed_at`,
      { defaultMaxAttempts: limits.defaultMaxAttempts },
    );
    if (lost.length > 0) {
      // Trigger and outcome are stored as codes (db/functions/attempt_triggers.sql, attempt_outcomes.sql).
      await trx('attempts').insert(
        lost.map((l) => ({
          id: newStoredId(),
          delivery_id: l.id,
          attempt_number: l.attempt_count,
          trigger: trx.raw('array_position(attempt_triggers(), :trigger::text)', { trigger: l.lost_trigger }),
          started_at: l.claimed_at,
          duration_ms: 0,
          outcome: trx.raw('array_position(attempt_outcomes(), :outcome::text)', { outcome: l.status === 'dead' ? 'terminal' : 'retry' }),
          error_class: 'worker_lost',
          error_message: 'the worker stopped before the attempt reported back',
        })),
      );
    }
    return lost;
  });
  told('max_attempts', lost.filter((l) => l.status === 'dead').length);

  const deadMaxAge: string[] = await db('deliveries')
    .whereRaw('id = ANY(:waiting)', { waiting: lockWaiting(db, waitingIds(db, 'pending').where('deadline_at', '<', db.fn.now()), ['pending']) })
    .where('status', 'pending')
    .where('deadline_at', '<', db.fn.now())
    .update({ status: 'dead', dead_reason: 'max_age', lease_until: null, updated_at: db.fn.now() })
    .returning('id')
    .then((rows: Array<{ id: string }>) => rows.map((r) => r.id));
  told('max_age', deadMaxAge.length);

  // Only `disabled`: a paused endpoint keeps its waiting work. The endpoints come first, from those
  // with pending work (pending_endpoints, one index descent each; the LIMIT keeps each endpoint a
  // look-up by key): nearly always none, and the step then costs that walk, not a read of every
  // pending entry of the queue. The UPDATE judges each endpoint again, in its own snapshot.
  const gone = "(ep.status = 'disabled' OR ep.deleted_at IS NOT NULL)";
  const { rows: goneIds } = await db.raw<{ rows: Array<{ id: string }> }>(
    `SELECT g.id FROM pending_endpoints() p(id) CROSS JOIN LATERAL (SELECT ep.id FROM endpoints ep WHERE ep.id = p.id AND ${gone} LIMIT 1) g`,
  );
  // Raw: the builder's UPDATE ... FROM cannot set columns from the joined endpoint.
  const ids = goneIds.map((g) => g.id);
  const { rows: deadEndpoint } =
    ids.length === 0
      ? { rows: [] }
      : await db.raw<{ rows: Array<{ dead_reason: string }> }>(
          `UPDATE deliveries d SET status = 'dead', dead_reason = CASE WHEN ep.deleted_at IS NULL THEN 'endpoint_disabled' ELSE 'endpoint_deleted' END,
                  last_error = CASE WHEN ep.deleted_at IS NULL THEN 'endpoint is disabled' ELSE 'endpoint was deleted' END,
                  updated_at = now()
             FROM endpoints ep
            WHERE d.id = ANY(:waiting) AND d.status = 'pending' AND ep.id = d.endpoint_id AND ${gone}
            RETURNING d.dead_reason`,
          { waiting: lockWaiting(db, waitingIds(db, 'pending').whereIn('endpoint_id', ids), ['pending']) },
        );
  told('endpoint_disabled', deadEndpoint.filter((r) => r.dead_reason === 'endpoint_disabled').length);
  told('endpoint_deleted', deadEndpoint.filter((r) => r.dead_reason === 'endpoint_deleted').length);

  return {
    requeued,
    lostInFlight: lost.length,
    deadMaxAge: deadMaxAge.length,
    deadMaxAttempts: lost.filter((l) => l.status === 'dead').length,
    deadIds: [...deadMaxAge, ...lost.filter((l) => l.status === 'dead').map((l) => l.id)].map((id) => idOfUuid('delivery', id)),
    deadDisabled: deadEndpoint.filter((r) => r.dead_reason === 'endpoint_disabled').length,
    deadDeleted: deadEndpoint.filter((r) => r.dead_reason === 'endpoint_deleted').length,
  };
}

/**
 * Ids of waiting deliveries (pending or queued) in one status, from delivery_queue (migration
 * 20261201000024). The status is written into the statement, not bound, so that even a generic
 * plan sees the partial index that holds it (delivery_queue_deadline, _due, _busy) instead of
 * reading every entry of that status through delivery_queue_tenant_status.
 */
function waitingIds(db: Knex, status: 'pending' | 'queued') {
  return db('delivery_queue').select('delivery_id').whereRaw(status === 'pending' ? "status = 'pending'" : "status = 'queued'");
}

/**
 * An array of those of the candidates still waiting in one of `statuses`, locked
 * (db/functions/lock_waiting.sql): what finishes waiting work picks it through this, since a slot's
 * claim is written to the queue row only and `deliveries.status` alone would still say `pending`.
 * Used as `id = ANY(...)`, so `deliveries` is read by its primary key, whatever the planner guesses
 * of how many come back.
 */
export function lockWaiting(db: Knex, candidates: Knex.QueryBuilder, statuses: Array<'pending' | 'queued'>): Knex.Raw {
  return db.raw('ARRAY(SELECT lock_waiting(ARRAY(:candidates), :statuses::text[]))', { candidates, statuses });
}

/** Admitted work that Redis refused goes back to pending now; a claim that already won keeps it. */
export async function unqueue(db: Knex, deliveryIds: string[]): Promise<number> {
  return db('deliveries').whereIn('id', deliveryIds.map((id) => uuidOf('delivery', id))).where('status', 'queued').update({ status: 'pending', lease_until: null, updated_at: db.fn.now() });
}
