import { matchesEventType } from '../domain/event-types.js';
import { memberSpan } from '../domain/json-span.js';
import { RawJson } from '../domain/raw-json.js';
import type { TenantScope } from './tenant-scope.js';

/** The most types one answer lists; the rest are reachable by searching events by type. */
export const EVENT_TYPES_CAP = 100;
/** Counting stops here: the catalog says "at least" rather than walk a busy type's every event. */
export const EVENT_TYPE_COUNT_CAP = 10_000;
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
  const { rows } = await scope.db.raw<{ rows: { type: string }[] }>(
    `WITH RECURSIVE types(type, n) AS (
         (SELECT type, 1 FROM events WHERE tenant_id = :tenantId ORDER BY type LIMIT 1)
       UNION ALL
         SELECT (SELECT e.type FROM events e WHERE e.tenant_id = :tenantId AND e.type > types.type ORDER BY e.type LIMIT 1), n + 1
           FROM types WHERE types.type IS NOT NULL AND n < :max
     )
     SELECT type FROM types WHERE type IS NOT NULL`,
    { tenantId: scope.tenantId, max },
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
 * sees only the events it may (its types; events delivered to its endpoints). One statement: a
 * UNION ALL of one index-ordered branch per type. A type with no visible event yields no row.
 */
async function summaries(scope: TenantScope, types: string[]): Promise<SummaryRow[]> {
  if (types.length === 0) return [];
  const db = scope.db;
  const branches = types.map((type) => {
    const counted = scope.from('events').where('events.type', type).select(db.raw('1')).limit(EVENT_TYPE_COUNT_CAP + 1);
    return scope
      .from('events')
      .where('events.type', type)
      .orderBy('events.id', 'desc')
      .limit(1)
      .select('events.type', 'events.id', 'events.created_at', 'events.message_id', 'events.body', db.raw('(SELECT count(*)::int FROM (?) AS capped) AS n', [counted]));
  });
  const { rows } = await db.raw<{ rows: SummaryRow[] }>(branches.map(() => '(?)').join(' UNION ALL '), branches);
  return rows;
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
        latest: { id: r.id, createdAt: r.created_at.toISOString(), messageId: r.message_id, data: dataOf(r.body) },
      },
    ];
  });
  return { data, truncated };
}
