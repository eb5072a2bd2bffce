/**
 * vacuum: removes from delivery_queue's indexes the entries of deliveries that left the queue.
 *
 * Every pick of an endpoint's next due delivery walks the index entries of the deliveries taken
 * before it until VACUUM removes them (~0.5 µs each, so 2.4 ms per pick after 5,000), and
 * autovacuum looks at a database at most once a minute. The queue holds only unfinished deliveries,
 * so vacuuming it costs milliseconds, and each sweep (every second by default) does; PARALLEL 0,
 * because index workers cost more to start than such small indexes take to clean. TRUNCATE false:
 * giving back the empty pages at the end would take an exclusive lock on the table every second,
 * for pages the next deliveries fill again. SKIP_LOCKED: a process whose neighbour is vacuuming
 * right now skips its turn instead of waiting.
 */
import type { Knex } from 'knex';

export async function vacuumQueue(db: Knex): Promise<void> {
  await db.raw('VACUUM (SKIP_LOCKED, PARALLEL 0, TRUNCATE false) delivery_queue');
}
