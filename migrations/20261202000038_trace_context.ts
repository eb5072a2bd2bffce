import type { Knex } from 'knex';

/**
 * Trace context (a W3C `traceparent`) kept with the work it belongs to, so that an attempt made an
 * hour later, or by another worker, joins the trace its event started:
 * - events.trace_parent: the event's fan-out span, written when it was accepted with tracing on and
 *   sampled; null otherwise, and then its attempts are not traced (the decision is made once);
 * - deliveries.trace_parent: set by a replay, whose attempts belong to the replay's own trace
 *   (linked to the event's);
 * - endpoints.propagate_trace_context: the endpoint asked for a `traceparent` on its requests.
 * Nullable columns without a default: adding them rewrites nothing.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw('ALTER TABLE events ADD COLUMN trace_parent text');
  await knex.raw('ALTER TABLE deliveries ADD COLUMN trace_parent text');
  await knex.raw('ALTER TABLE endpoints ADD COLUMN propagate_trace_context boolean NOT NULL DEFAULT false');
}

/**
 * db/functions/publish_event.sql adds an overload that stores trace_parent, beside the signature the
 * migrations before this one know. The overload goes with the column: migration 20261129000012's
 * down drops publish_event by name alone, which fails while two exist.
 */
export async function down(knex: Knex): Promise<void> {
  await knex.raw(
    'DROP FUNCTION IF EXISTS publish_event(text, text[], text, text, text, text, text, text, text, timestamptz, integer, text)',
  );
  await knex.raw('ALTER TABLE endpoints DROP COLUMN propagate_trace_context');
  await knex.raw('ALTER TABLE deliveries DROP COLUMN trace_parent');
  await knex.raw('ALTER TABLE events DROP COLUMN trace_parent');
}
