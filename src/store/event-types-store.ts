import { matchesEventType } from '../domain/event-types.js';
import { memberSpan } from '../domain/json-span.js';
import { idOfUuid, lowestStoredId } from '../domain/ids.js';
import { RawJson } from '../domain/raw-json.js';
import { eventBody } from './events-store.js';
import type { TenantScope } from './tenant-scope.js';

/** The most types one answer lists; the rest are reachable by searching events by type. */
export const EVENT_TYPES_CAP = 100;
/** Counting stops here: the catalog says "more than" rather than walk a busy type's every event. */
export const EVENT_TYPE_COUNT_CAP = 1_000;
/**
 * A session limited to endpoints sees only the events delivered to them, which may be none of a
 * busy type's: it looks among this many of each type's newest events, so no type is walked whole.
 */
export const EVENT_TYPE_SCAN_CAP = 2_000;
/** A session limited to some types looks through at most this many distinct types for its own. */
const TYPE_SCAN_CAP = 2_000;

export interface EventTypeSummary {
  type: string;
  count: number;
  countCapped: boolean;
  latest: { id: string; createdAt: string; messageId: string | null; data: RawJson };
}

/**
 * The tenant's distinct event types in order, by a skip scan over events_tenant_type
 * (tenant_id, type, id): each step is one index descent to the next type above the last, so the
 * cost follows the number of types, not of events. `max` bounds the walk.
 */
async function distinctTypes(scope: TenantScope, max: number): Promise<string[]> {
  // Not narrowed to a portal session: the types are narrowed afterwards, by summaries() and the caller.
  const first = scope.fromWholeTenant('events').orderBy('events.type').limit(1).select('events.type');
  const next = scope.fromWholeTenant('events', 'e').where('e.type', '>', scope.ref('types.type')).orderBy('e.type').limit(1).select('e.type');
  // Composed, not built: the builder cannot write a recursive CTE whose step is a correlated subquery.
  const rows = await scope.composed<{ type: string }>(
    `WITH RECURSIVE types(type, n) AS (
         (SELECT first.type, 1 FROM (:first) AS first)
       UNION ALL
         SELECT (:next), n + 1 FROM types WHERE types.type IS NOT NULL AND n < :max
     )
     SELECT type FROM types WHERE type IS NOT NULL`,
    { first, next, max },
  );
  return rows.map((r) => r.type);
}

interface SummaryRow {
  type: string;
  id: string;
  created_at: Date;
  message_id: string | null;
  body: string;
  n: number;
}

/**
 * Per type, its newest event and a capped count, both through TenantScope so a portal session
 * sees only the events it may (its types; events delivered to its endpoints). One statement: the
 * types unnested and each joined LATERAL to an index-ordered walk of its events_tenant_type range
 * (planned once, not once per type), reading at most EVENT_TYPE_COUNT_CAP + 1 entries, or for a
 * session limited to endpoints the newest EVENT_TYPE_SCAN_CAP. A type with no visible event
 * yields no row.
 */
async function summaries(scope: TenantScope, types: string[]): Promise<SummaryRow[]> {
  if (types.length === 0) return [];
  const ofType = () => {
    const q = scope.from('events').where('events.type', scope.ref('t.type'));
    if (scope.session?.endpointIds !== undefined) {
      // Bounded by the id of the type's SCAN_CAP-th newest event: the lowest uuid (no bound) when it has fewer.
      // The whole tenant's: the bound only limits the walk, the events walked are still the session's.
      const bound = scope.fromWholeTenant('events', 'w').where('w.type', scope.ref('t.type')).orderBy('w.id', 'desc').offset(EVENT_TYPE_SCAN_CAP - 1).limit(1).select('w.id');
      q.where('events.id', '>=', scope.expression('coalesce((:bound), :lowest::uuid)', { bound, lowest: lowestStoredId }));
    }
    return q;
  };
  const latest = ofType().orderBy('events.id', 'desc').limit(1).select('events.id', 'events.created_at', 'events.message_id', eventBody(scope));
  const counted = ofType().select(scope.expression('1')).limit(EVENT_TYPE_COUNT_CAP + 1);
  // Composed, not built: the builder has no LATERAL join.
  return scope.composed<SummaryRow>(
    `SELECT t.type, latest.*, (SELECT count(*)::int FROM (:counted) AS capped) AS n
       FROM unnest(:types::text[]) AS t(type) CROSS JOIN LATERAL (:latest) AS latest`,
    { counted, types, latest },
  );
}

/** The event's `data` member as stored, which is the text the publisher or provider sent. */
function dataOf(body: string): RawJson {
  const span = memberSpan(body, 'data');
  return span ? new RawJson(body.slice(span.start, span.end)) : RawJson.of(null);
}

export async function listEventTypes(scope: TenantScope): Promise<{ data: EventTypeSummary[]; truncated: boolean }> {
  const allowed = scope.session?.eventTypes;
  // A session limited to some types filters the walk, so it looks further to find a page of its own.
  const scanned = await distinctTypes(scope, allowed ? TYPE_SCAN_CAP : EVENT_TYPES_CAP + 1);
  const candidates = allowed ? scanned.filter((t) => matchesEventType(allowed, t)) : scanned;
  const truncated = candidates.length > EVENT_TYPES_CAP || (allowed !== undefined && scanned.length >= TYPE_SCAN_CAP);
  const listed = candidates.slice(0, EVENT_TYPES_CAP);
  const byType = new Map((await summaries(scope, listed)).map((r) => [r.type, r]));
  const data = listed.flatMap((type): EventTypeSummary[] => {
    const r = byType.get(type);
    if (!r) return [];
    return [
      {
        type,
        count: Math.min(r.n, EVENT_TYPE_COUNT_CAP),
        countCapped: r.n > EVENT_TYPE_COUNT_CAP,
        latest: { id: idOfUuid('event', r.id), createdAt: r.created_at.toISOString(), messageId: r.message_id, data: dataOf(r.body) },
      },
    ];
  });
  return { data, truncated };
}
