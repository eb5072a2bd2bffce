import { newStoredId } from '../domain/ids.js';
import { RecentMap } from '../domain/recent.js';

/**
 * Delivery ids are TypeIDs made here, not in SQL: they must sort by creation time, and ids made in
 * SQL were not monotonic within a millisecond. How many an event needs (its matching endpoints) is
 * only known in the database, so the caller guesses; the fan-out functions (domain/fan-out.ts)
 * write nothing when the guess is short and answer how many they need. The guess is the number the
 * last event of the same tenant and type needed (filters match by type, so one number per tenant would keep missing for a
 * tenant whose types reach different numbers of endpoints): the steady state is one call, and an
 * endpoint added or removed costs one extra call for the next event of each type.
 */
export const initialDeliveryIdGuess = 4;
/** What each tenant and type needed last, for the 10,000 pairs set most recently: tenants choose their types. */
const needed = new RecentMap<number>(10_000);

/**
 * Runs `call` with enough delivery ids, as stored (the uuid each TypeID encodes): again, with as
 * many as it said it needs, when it had too few.
 */
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
    needed.set(key, row.endpoint_count);
    if (row.endpoint_count <= ids.length) return row;
    if (round === 5) throw new Error(`fan-out still needs ${row.endpoint_count} delivery ids after ${round} calls`);
    ids = newDeliveryIds(row.endpoint_count);
  }
}

function newDeliveryIds(n: number): string[] {
  return Array.from({ length: n }, newStoredId);
}
