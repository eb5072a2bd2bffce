import type { Knex } from 'knex';
import { run, statement } from '../infra/sql.js';

/**
 * The stored trace context of the work an attempt belongs to (migration 20261202000038): each
 * event's fan-out span, and a replayed or backfilled delivery's own request span. Read only while
 * tracing is on; the claim statements do not carry it, so tracing off changes nothing on that path.
 */
const readStatement = statement(
  'trace_parents',
  `SELECT 'event' AS kind, id, trace_parent FROM events WHERE id = ANY(:eventIds::text[])
   UNION ALL
   SELECT 'delivery' AS kind, id, trace_parent FROM deliveries WHERE id = ANY(:deliveryIds::text[])`,
);

export interface StoredTraceParents {
  events: Map<string, string | null>;
  deliveries: Map<string, string | null>;
}

export async function readTraceParents(db: Knex, eventIds: string[], deliveryIds: string[]): Promise<StoredTraceParents> {
  const rows = await run<{ kind: 'event' | 'delivery'; id: string; trace_parent: string | null }>(db, readStatement, { eventIds, deliveryIds });
  const found: StoredTraceParents = { events: new Map(), deliveries: new Map() };
  for (const r of rows) (r.kind === 'event' ? found.events : found.deliveries).set(r.id, r.trace_parent);
  return found;
}
