import type { Knex } from 'knex';
import { run, statement } from '../infra/sql.js';

/**
 * The stored trace context of the work an attempt belongs to (migration 20261202000038): each
 * event's fan-out span, and a replayed delivery's own replay span. Read only while
 * tracing is on; the claim statements do not carry it, so tracing off changes nothing on that path.
 */
const readStatement = statement(
  'trace_parents',
  // LATERAL, one id at a time: each lookup is pruned to the one partition of events its id's time
  // falls in, where `id = ANY(:ids)` would probe every partition's index.
  `SELECT 'event' AS kind, k.id, e.trace_parent
     FROM unnest(:eventIds::text[]) AS k(id), LATERAL (SELECT ev.trace_parent FROM events ev WHERE ev.id = k.id) e
   UNION ALL
   SELECT 'delivery' AS kind, k.id, d.trace_parent
     FROM unnest(:deliveryIds::text[]) AS k(id), LATERAL (SELECT dl.trace_parent FROM deliveries dl WHERE dl.id = k.id) d`,
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
