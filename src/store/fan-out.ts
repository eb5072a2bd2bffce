import { newId } from '../domain/ids.js';

/** What fan-out created for one event. */
export interface FanOutResult {
  pending: number;
  deadDisabled: number;
}

/*
 * Fan-out itself lives in SQL (`fan_out_targets` and `fan_out_write`, each in db/functions/<name>.sql),
 * used by callback intake (`intake_accept_many`, a batch at a time) and by
 * publishing (`publish_event` through `fan_out_insert`, one event), so the two cannot drift apart:
 * one delivery per endpoint of the tenant whose filter matches the event type; disabled endpoints
 * get a dead `endpoint_disabled` delivery instead of none, so what piles up while an endpoint is off
 * can be replayed once it is back; operational events (`platform.*`) only reach endpoints that name
 * them, so a catch-all endpoint never receives a type it did not know existed. What is left here is the ids.
 */

/**
 * Delivery ids are TypeIDs made here, not in SQL: they must sort by creation time, and ids made in
 * SQL were not monotonic within a millisecond. How many an event needs (its matching endpoints) is
 * only known in the database, so the caller guesses; the fan-out functions write nothing when the
 * guess is short and answer how many they need. The guess is the number the last event of the same
 * tenant and type needed (filters match by type, so one number per tenant would keep missing for a
 * tenant whose types reach different numbers of endpoints): the steady state is one call, and an
 * endpoint added or removed costs one extra call for the next event of each type.
 */
export const initialDeliveryIdGuess = 4;
const maxRemembered = 10_000;
const needed = new Map<string, number>();

/** Runs `call` with enough delivery ids: again, with as many as it said it needs, when it had too few. */
export async function withDeliveryIds<R extends { endpoint_count: number }>(
  tenantId: string,
  type: string,
  call: (ids: string[]) => Promise<R>,
): Promise<R> {
  const key = `${tenantId}\u0000${type}`;
  let ids = newDeliveryIds(needed.get(key) ?? initialDeliveryIdGuess);
  // Endpoints would have to be added between every two calls to need a third; a fifth means a bug.
  for (let round = 1; ; round++) {
    const row = await call(ids);
    remember(key, row.endpoint_count);
    if (row.endpoint_count <= ids.length) return row;
    if (round === 5) throw new Error(`fan-out still needs ${row.endpoint_count} delivery ids after ${round} calls`);
    ids = newDeliveryIds(row.endpoint_count);
  }
}

function newDeliveryIds(n: number): string[] {
  return Array.from({ length: n }, () => newId('delivery'));
}

function remember(key: string, count: number): void {
  // Most recently used last; the oldest goes when the map is full (types are chosen by tenants).
  needed.delete(key);
  if (needed.size >= maxRemembered) needed.delete(needed.keys().next().value!);
  needed.set(key, count);
}
