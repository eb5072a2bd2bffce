import type { Knex } from 'knex';

/**
 * Two foreign keys whose checks every new delivery paid for, once per row: without them the storage
 * scenario's PostgreSQL CPU per event fell from 0.88–0.96 to 0.79–0.80 ms (docs/performance.md,
 * "Keys that every delivery paid for").
 *
 * - `deliveries.event_id → events`: `events` is partitioned, and each check ran a look-up over the
 *   partitioned table and locked the event's row (~32 µs a delivery in plain inserts). Fan-out
 *   writes an event and its deliveries in one statement (fan_out_write). Retention drops a day of
 *   events only once no kept delivery points into it (deliveriesReferenceEvents), now under an
 *   advisory lock that backfills, the only writers of deliveries of past events, take shared
 *   (eventDaysLock, src/store/retention-store.ts).
 *   A tenant's deletion still reaches its deliveries, through their endpoints.
 * - `delivery_queue.delivery_id → deliveries`: the queue is the triggers' mirror of unfinished
 *   deliveries, written only from the deliveries' own rows. Its check locked the delivery just
 *   inserted, once per queue row, and its cascade ran one statement per deleted delivery. What the
 *   cascade did is now the mirror's own rule: delivery_queue_changed, called after a DELETE too.
 *
 * Metadata only: no row is rewritten, and release 0.5.0's processes run on it as before. While a
 * deploy rolls, a retention run of 0.5.0 takes no eventDaysLock: a backfill committing between its
 * check and its drop of a day (milliseconds apart, once an hour) could leave deliveries whose event
 * is gone, which no key refuses any more. The trigger runs the function text this release applies
 * right after its migrations; no process deletes an unfinished delivery in between.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`CREATE TRIGGER deliveries_queue_removed AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION delivery_queue_changed()`);
  await knex.raw('ALTER TABLE delivery_queue DROP CONSTRAINT delivery_queue_delivery_id_fkey');
  await knex.raw('ALTER TABLE deliveries DROP CONSTRAINT deliveries_event_id_fkey');
}

/**
 * The keys again, checked against the rows as they are (every process is stopped for a down,
 * docs/operations/upgrade.md). Rows the keys would refuse are removed first: queue rows whose
 * delivery is gone, and deliveries whose event is gone, which no process could have sent.
 */
export async function down(knex: Knex): Promise<void> {
  await knex.raw('DELETE FROM delivery_queue q WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.id = q.delivery_id)');
  await knex.raw('ALTER TABLE delivery_queue ADD CONSTRAINT delivery_queue_delivery_id_fkey FOREIGN KEY (delivery_id) REFERENCES deliveries(id) ON DELETE CASCADE');
  await knex.raw('DROP TRIGGER deliveries_queue_removed ON deliveries');
  await knex.raw('DELETE FROM deliveries d WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id)');
  await knex.raw('ALTER TABLE deliveries ADD CONSTRAINT deliveries_event_id_fkey FOREIGN KEY (event_id) REFERENCES events(id) ON DELETE CASCADE');
}
