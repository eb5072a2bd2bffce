import type { Knex } from 'knex';
import { windowReadsPerEvent } from '../domain/backfill.js';
import { newId, newStoredId, uuidOfId } from '../domain/ids.js';
import { advisoryLocks } from '../infra/advisory-locks.js';
import { audit } from './audit-store.js';
import { eventsKeptFromId, uuidFloor } from '../domain/retention.js';
import { eventDaysLock, watermark } from './retention-store.js';
import { eventColumns, type EventRow } from './events-store.js';
import type { TenantScope } from './tenant-scope.js';

export interface BackfillRequest {
  since: Date;
  /** Exclusive. The route fills in PostgreSQL's now when the request leaves it out, the clock its window was checked by. */
  until: Date;
  /** Narrows the endpoint's own filter (both must take a type); absent: the endpoint's filter alone. */
  eventTypes?: string[];
  reason: string;
}

export interface BackfillPacing {
  ratePerSecond: number;
  defaultMaxAgeSeconds: number;
  /** The most events one backfill may take (REPLAY_MAX_LIMIT, as for a bulk replay). */
  maxEvents: number;
}

export type BackfillRefusal = 'not_found' | 'deleted' | 'disabled';

interface TargetEndpoint {
  /** As stored: the uuid its TypeID encodes. */
  id: string;
  status: string;
  deleted_at: Date | null;
  event_types: string[];
  /** The endpoint's content filter as a jsonpath predicate, or null (see db/functions/fan_out_targets.sql). */
  filter_path: string | null;
}

/** Serialises backfills of one endpoint. */
const backfillLock = advisoryLocks.backfillEndpoint;

/** How many events a dry run shows. */
const sampleSize = 10;

/**
 * Event ids (stored as the uuid of their TypeID) carry the time they were made, within moments of the event's
 * created_at; a range of ids a minute wider than the window lets PostgreSQL skip the day partitions
 * outside it, and created_at then decides exactly.
 */
const idSlackMs = 60_000;

async function targetEndpoint(scope: TenantScope, endpointId: string, lock: boolean): Promise<TargetEndpoint | BackfillRefusal> {
  const key = uuidOfId('endpoint', endpointId);
  if (key === null) return 'not_found';
  const q = scope.from('endpoints').where('endpoints.id', key);
  // FOR SHARE: a concurrent delete or disable waits for the deliveries to exist, then sees them.
  if (lock) q.forShare();
  const ep: TargetEndpoint | undefined = await q.first('endpoints.id', 'endpoints.status', 'endpoints.deleted_at', 'endpoints.event_types', 'endpoints.filter_path');
  if (!ep) return 'not_found';
  if (ep.deleted_at) return 'deleted';
  // A paused endpoint takes a backfill (its deliveries wait); only a disabled one would dead-letter them.
  if (ep.status === 'disabled') return 'disabled';
  return ep;
}

/** A request's window with the lowest event id retention keeps, read once per backfill (eventsKeptFromId). */
interface BackfillWindow extends BackfillRequest {
  keptFrom: string;
}

async function readWindow(scope: TenantScope, request: BackfillRequest): Promise<BackfillWindow> {
  return { ...request, keptFrom: eventsKeptFromId(await watermark(scope, 'events')) };
}

/**
 * The tenant's events accepted in [since, until): what a backfill reads. The whole tenant's events:
 * a portal session sees an event through its deliveries to the session's endpoints, and the events
 * a backfill takes have none by definition. The endpoint itself was found through the session's
 * scope, and a session's event types narrow `candidates`.
 */
function windowEvents(scope: TenantScope, { since, until, keptFrom }: BackfillWindow): Knex.QueryBuilder {
  return scope
    .fromWholeTenant('events')
    // Not a day retention has begun to remove (see eventDaysLock).
    .where('events.id', '>=', keptFrom)
    .where('events.id', '>=', uuidFloor(new Date(since.getTime() - idSlackMs)))
    .where('events.id', '<', uuidFloor(new Date(until.getTime() + idSlackMs)))
    .where('events.created_at', '>=', since)
    .where('events.created_at', '<', until);
}

/**
 * Refuses a window holding more events than a backfill may read (domain/backfill.ts), before
 * reading them all: answers where the first that many end, the time to split it at.
 */
async function assertWindowWithin(scope: TenantScope, request: BackfillWindow, maxEvents: number): Promise<void> {
  const limit = maxEvents * windowReadsPerEvent;
  const beyond: { created_at: Date } | undefined = await windowEvents(scope, request).orderBy('events.id').offset(limit).first('events.created_at');
  if (beyond) throw new BackfillWindowTooLarge(limit, beyond.created_at);
}

/**
 * The events a backfill of `ep` takes: the tenant's events accepted in [since, until) whose type the
 * endpoint's filter takes (endpoint_matches_type, the rule fan-out asks) and the request's
 * eventTypes too, whose body the endpoint's content filter takes (as fan_out_targets evaluates
 * it), that fan-out forwarded (a `stale` event was forwarded to nobody), and that have no
 * delivery to this endpoint yet. Oldest first.
 */
function candidates(scope: TenantScope, ep: TargetEndpoint, request: BackfillWindow): Knex.QueryBuilder {
  const q = windowEvents(scope, request)
    .where('events.stale', false)
    // Another endpoint's test event is not the tenant's event (migration 20261204000046).
    .whereNull('events.test_endpoint_id')
    .whereRaw('endpoint_matches_type(:types::text[], events.type)', { types: ep.event_types });
  if (ep.filter_path !== null) q.whereRaw('jsonb_path_match(filter_document(event_body(events)), :path::jsonpath)', { path: ep.filter_path });
  for (const narrowing of [request.eventTypes, scope.session?.eventTypes]) {
    if (narrowing) q.whereRaw('endpoint_matches_type(:types::text[], events.type)', { types: narrowing });
  }
  return q.whereNotExists(
    scope.fromWholeTenant('deliveries').select(scope.expression('1')).where('deliveries.event_id', scope.ref('events.id')).where('deliveries.endpoint_id', ep.id),
  );
}

/** What a backfill would create, changing nothing: how many deliveries, and the first events. */
export async function previewBackfill(scope: TenantScope, endpointId: string, request: BackfillRequest, maxEvents: number) {
  const ep = await targetEndpoint(scope, endpointId, false);
  if (typeof ep === 'string') return ep;
  const window = await readWindow(scope, request);
  await assertWindowWithin(scope, window, maxEvents);
  const [{ count }] = await candidates(scope, ep, window).count({ count: '*' });
  const sample: EventRow[] = await candidates(scope, ep, window).select(eventColumns(scope)).orderBy('events.id').limit(sampleSize);
  return { total: Number(count), sample };
}

export class BackfillTooLarge extends Error {
  constructor(readonly max: number) {
    super(`more than ${max} events match`);
  }
}

/** More events in the window than a backfill reads; `splitAt` is when the first `limit` of them end. */
export class BackfillWindowTooLarge extends Error {
  constructor(
    readonly limit: number,
    readonly splitAt: Date,
  ) {
    super(`more than ${limit} events in the window`);
  }
}

/**
 * Creates the missing deliveries, paced, as one job followed like a bulk replay (a `replays` row of
 * kind `backfill`), audited as `endpoint.backfilled`. Backfills of one endpoint take turns (an
 * advisory lock held until commit), so the second of two concurrent ones sees the first's
 * deliveries and creates none of them again; the unique key on (event, endpoint) backs that up.
 * `write` is the lifecycle's statement (delivery/sql/backfill.ts); it answers the ids it wrote.
 */
export async function startBackfill(
  scope: TenantScope,
  endpointId: string,
  request: BackfillRequest,
  pacing: BackfillPacing,
  write: (trx: Knex.Transaction, rows: { endpointId: string; replayId: string; eventIds: string[]; deliveryIds: string[] }) => Promise<string[]>,
): Promise<{ id: string; total: number } | BackfillRefusal> {
  return scope.transactionWithPlatformDb(async (s, trx) => {
    // First: the events watermark does not rise past a day this backfill may read until it commits,
    // and it reads from the watermark on (eventDaysLock).
    await s.composed('SELECT pg_advisory_xact_lock_shared(:key::bigint)', { key: eventDaysLock });
    await s.composed('SELECT pg_advisory_xact_lock(:key::int, hashtext(:endpointId))', { key: backfillLock, endpointId });
    const ep = await targetEndpoint(s, endpointId, true);
    if (typeof ep === 'string') return ep;
    const { until } = request;
    const window = await readWindow(s, request);
    await assertWindowWithin(s, window, pacing.maxEvents);
    const eventIds: string[] = await candidates(s, ep, window)
      .orderBy('events.id')
      .limit(pacing.maxEvents + 1)
      .pluck('events.id');
    if (eventIds.length > pacing.maxEvents) throw new BackfillTooLarge(pacing.maxEvents);
    const id = newId('replay');
    const filter = { endpointId, since: request.since, until, eventTypes: request.eventTypes ?? null };
    await s.insert('replays', {
      id,
      kind: 'backfill',
      actor_type: s.actor.type,
      actor_id: s.actor.id,
      reason: request.reason,
      filter: JSON.stringify(filter),
      total: eventIds.length,
    });
    const deliveryIds = eventIds.map(newStoredId);
    const written = await write(trx, { endpointId, replayId: id, eventIds, deliveryIds });
    if (written.length !== eventIds.length) {
      // Cannot happen under the lock (every chosen event lacked a delivery); the total must not lie.
      await s.from('replays').where('replays.id', id).update({ total: written.length });
    }
    await audit(s, {
      action: 'endpoint.backfilled',
      targetType: 'endpoint',
      targetId: endpointId,
      reason: request.reason,
      details: { replayId: id, since: request.since, until, eventTypes: request.eventTypes ?? null, count: written.length },
    });
    return { id, total: written.length };
  });
}
