/**
 * Transitions that an operator's action causes, run inside the caller's transaction (with its audit
 * entry):
 *   deleteEndpoint: pending | queued → dead (`endpoint_deleted`): waiting work is dead-lettered,
 *                   never silently dropped, and can be replayed elsewhere later
 *   replay:         dead | succeeded → pending, trigger `replay`, with a fresh attempt budget and a
 *                   fresh maximum age; bulk replays are spaced at the replay rate
 */
import type { Knex } from 'knex';
import { uuidOf } from '../../domain/ids.js';
import { lockWaiting } from './sweep.js';

/** Dead-letters the work still waiting for a deleted endpoint; answers how many. */
export async function deadLetterForDeletedEndpoint(trx: Knex.Transaction, endpointId: string): Promise<number> {
  const endpoint = uuidOf('endpoint', endpointId);
  const waiting = trx('delivery_queue').select('delivery_id').where({ endpoint_id: endpoint }).whereIn('status', ['pending', 'queued']);
  return trx('deliveries')
    .whereRaw('id = ANY(:waiting)', { waiting: lockWaiting(trx, waiting, ['pending', 'queued']) })
    .where({ endpoint_id: endpoint })
    .whereIn('status', ['pending', 'queued'])
    .update({ status: 'dead', dead_reason: 'endpoint_deleted', last_error: 'endpoint was deleted', lease_until: null, updated_at: trx.fn.now() });
}

/**
 * Replay restarts the delivery with a fresh attempt budget and a fresh maximum age, in the trace of
 * the replay (:traceParent, null when it is not traced).
 */
const restart = (startAt: string) => `
  status = 'pending', next_trigger = 'replay', next_attempt_at = ${startAt}, lease_until = NULL,
  dead_reason = NULL, attempt_base = d.attempt_count, replayed_at = now(), updated_at = now(), trace_parent = :traceParent,
  deadline_at = ${startAt} + make_interval(secs => COALESCE((ep.retry_policy->>'maxEventAgeSeconds')::int, :maxAge))`;

/**
 * Restarts one delivery now. The caller has checked (under a row lock) that it is final. It leaves
 * the bulk replay that last took it, as a later bulk replay takes it over: that replay's progress
 * is its deliveries' (replayProgress), and this one is not its work.
 */
export async function restartDelivery(trx: Knex.Transaction, id: string, defaultMaxAgeSeconds: number, traceParent: string | null): Promise<void> {
  await trx.raw(`UPDATE deliveries d SET ${restart('now()')}, replay_id = NULL FROM endpoints ep WHERE d.id = :id AND ep.id = d.endpoint_id`, {
    id: uuidOf('delivery', id),
    maxAge: defaultMaxAgeSeconds,
    traceParent,
  });
}

/** Restarts deliveries in the order given, the n-th at n / rate seconds from now. */
export async function restartDeliveriesPaced(
  trx: Knex.Transaction,
  ids: string[],
  pacing: { replayId: string; ratePerSecond: number; defaultMaxAgeSeconds: number; traceParent: string | null },
): Promise<void> {
  if (ids.length === 0) return;
  await trx.raw(
    `UPDATE deliveries d SET ${restart('now() + make_interval(secs => o.ord / :rate::float8)')}, replay_id = :replay
       FROM endpoints ep, unnest(:ids::uuid[]) WITH ORDINALITY AS o(id, ord)
      WHERE d.id = o.id AND ep.id = d.endpoint_id`,
    { ids: ids.map((id) => uuidOf('delivery', id)), rate: pacing.ratePerSecond, replay: pacing.replayId, maxAge: pacing.defaultMaxAgeSeconds, traceParent: pacing.traceParent },
  );
}
