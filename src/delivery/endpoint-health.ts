/**
 * Endpoint health: the one writer of an endpoint's status, and of the circuit.
 *
 *   circuit            SQL function `endpoint_health_after_attempts` (db/functions), moved by every
 *                      recorded attempt; `next_due` obeys it and src/domain/circuit.ts shows it
 *   410 Gone           `disableGone`: the attempt that got it disables the endpoint before its result
 *                      is recorded, so no slot hands anything on to it afterwards
 *   failing too long   `disableFailing`: the sweep disables active endpoints whose failure streak has
 *                      lasted longer than AUTO_DISABLE_AFTER_SECONDS (a paused one is never disabled)
 *   warnings           `warnFailing`: before that, the sweep raises `failure_warned_percent` as the
 *                      streak passes 50, 75 and 90 % of the window (a success clears it with the streak)
 *   the tenant         `setStatus` (PATCH status, pause, resume) and `newDestination` (a new URL),
 *                      inside the endpoint update's transaction, which audits them
 *   released_at        when held work was let go: the circuit's closing (SQL above), a resume or
 *                      re-enable, a new URL, and `backfilled`; read by the delivery-latency
 *                      objective (src/domain/slo.ts)
 *
 * A disable by the platform writes its `endpoint.auto_disabled` audit entry in the same transaction,
 * and only the call that changed the row reports it, so one disable is one entry and one
 * `platform.endpoint.disabled`.
 *
 * Pausing keeps the circuit as it was: resuming a receiver that was failing probes it with one
 * attempt first. The time spent paused does not count toward the failure streak: resume moves
 * `failing_since` forward by it, so a pause neither disables an endpoint nor brings its disable closer.
 */
import type { Knex } from 'knex';
import { FAILURE_WARNING_PERCENTS, thresholdsToAnnounce } from '../domain/failure-warnings.js';
import type { EndpointStatus } from '../domain/endpoints.js';
import { idOfUuid, uuidOf } from '../domain/ids.js';
import { recordAudit } from '../store/audit-store.js';

export type { EndpointStatus };

export interface DisabledEndpoint {
  id: string;
  tenantId: string;
  reason: string;
}

/** What a tenant's status change was, for its audit entry and operational event; null when none. */
export type StatusChange = 'paused' | 'resumed' | 'enabled' | 'disabled';

const systemActor = { type: 'system', id: null } as const;

/** A closed circuit and no failure streak: what a re-enabled endpoint and a new destination start with. */
const closedCircuit = { consecutive_failures: 0, failing_since: null, failure_warned_percent: null, circuit_open_until: null };

/** What waited for the endpoint may go now: its first attempts leave the latency objective (src/domain/slo.ts). */
const released = (trx: Knex.Transaction) => ({ released_at: trx.fn.now() });

/** The columns a status change from `from` to `to` writes. */
function statusColumns(trx: Knex.Transaction, from: EndpointStatus, to: EndpointStatus, reason: string | null): Record<string, unknown> {
  const columns: Record<string, unknown> = {
    status: to,
    disabled_reason: to === 'disabled' ? reason : null,
    paused_at: to === 'paused' ? trx.fn.now() : null,
    updated_at: trx.fn.now(),
  };
  // An endpoint coming back from disabled starts afresh; one coming back from a pause keeps its
  // streak, less the time it spent paused.
  if (from === 'disabled' && to !== 'disabled') Object.assign(columns, closedCircuit);
  if (to === 'active') Object.assign(columns, released(trx));
  if (from === 'paused' && to === 'active') columns.failing_since = trx.raw('failing_since + (now() - COALESCE(paused_at, now()))');
  return columns;
}

function changeOf(from: EndpointStatus, to: EndpointStatus): StatusChange | null {
  if (from === to) return null;
  if (to === 'paused') return 'paused';
  if (to === 'disabled') return 'disabled';
  return from === 'paused' ? 'resumed' : 'enabled';
}

/**
 * A tenant's status change, in the caller's transaction (which holds the endpoint's row and
 * audits); answers what it was, or null when the endpoint already had that status.
 */
export async function setStatus(
  trx: Knex.Transaction,
  endpoint: { id: string; status: EndpointStatus },
  to: EndpointStatus,
  reason: string | null,
): Promise<StatusChange | null> {
  const change = changeOf(endpoint.status, to);
  if (change) await trx('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }).update(statusColumns(trx, endpoint.status, to, reason));
  return change;
}

/**
 * A new URL is a new destination: its circuit starts closed with no failure streak, because the
 * old receiver's failures say nothing about it. In the caller's transaction, like `setStatus`.
 */
export async function newDestination(trx: Knex.Transaction, endpointId: string): Promise<void> {
  await trx('endpoints').where({ id: uuidOf('endpoint', endpointId) }).update({ ...closedCircuit, ...released(trx) });
}

/** A backfill gave the endpoint past events: their first attempts are late by design, not by us. */
export async function backfilled(trx: Knex.Transaction, endpointId: string): Promise<void> {
  await trx('endpoints').where({ id: uuidOf('endpoint', endpointId) }).update(released(trx));
}

async function disableBySystem(trx: Knex.Transaction, endpoint: DisabledEndpoint): Promise<void> {
  await recordAudit(trx, {
    tenantId: endpoint.tenantId,
    actor: systemActor,
    action: 'endpoint.auto_disabled',
    targetType: 'endpoint',
    targetId: endpoint.id,
    reason: endpoint.reason,
  });
}

/**
 * Disables an endpoint that answered 410 Gone. Several attempts in flight may all get the 410; the
 * `status = 'active'` condition lets exactly one of them make the change, and only it returns true.
 */
export async function disableGone(db: Knex, endpoint: DisabledEndpoint): Promise<boolean> {
  return db.transaction(async (trx) => {
    const changed = await trx('endpoints')
      .where({ id: uuidOf('endpoint', endpoint.id), status: 'active' })
      .whereNull('deleted_at')
      .update(statusColumns(trx, 'active', 'disabled', endpoint.reason));
    if (changed === 0) return false;
    await disableBySystem(trx, endpoint);
    return true;
  });
}

/** Disables the endpoints failing continuously for longer than the window; answers which. */
export async function disableFailing(db: Knex, autoDisableAfterSeconds: number): Promise<DisabledEndpoint[]> {
  return db.transaction(async (trx) => {
    const failing: Array<{ id: string; tenant_id: string; failing_since: Date }> = await trx('endpoints')
      .select('id', 'tenant_id', 'failing_since')
      .where('status', 'active')
      .whereNull('deleted_at')
      .where('failing_since', '<', trx.raw('now() - make_interval(secs => :window)', { window: autoDisableAfterSeconds }))
      .forUpdate()
      .skipLocked();
    const disabled: DisabledEndpoint[] = [];
    for (const ep of failing) {
      const endpoint = { id: idOfUuid('endpoint', ep.id), tenantId: idOfUuid('tenant', ep.tenant_id), reason: `failing continuously since ${ep.failing_since.toISOString()}` };
      await trx('endpoints').where({ id: ep.id }).update(statusColumns(trx, 'active', 'disabled', endpoint.reason));
      await disableBySystem(trx, endpoint);
      disabled.push(endpoint);
    }
    return disabled;
  });
}

/** An endpoint whose failure streak passed warning thresholds, with what `platform.endpoint.failing` says. */
export interface FailingEndpoint {
  id: string;
  tenantId: string;
  failingSince: Date;
  /** Shares of the window newly passed, in order (0.5, 0.75, 0.9): one event each. */
  thresholds: number[];
  /** The error of the endpoint's most recently failed delivery; already sanitized when recorded. */
  lastError: string | null;
}

/**
 * Raises the warned level of every active endpoint whose streak passed a threshold it was not warned
 * at, and answers what to announce. Several sweepers run at once: the row lock (SKIP LOCKED) and the
 * re-checked condition on `failure_warned_percent` let exactly one of them raise a level and return it.
 */
export async function warnFailing(db: Knex, autoDisableAfterSeconds: number): Promise<FailingEndpoint[]> {
  return db.transaction(async (trx) => {
    const { rows } = await trx.raw<{ rows: Array<{ id: string; tenant_id: string; failing_since: Date; warned: number | null; reached: number }> }>(
      `WITH due AS (
         SELECT e.id, e.failure_warned_percent AS warned,
                (SELECT max(p) FROM unnest(:percents::smallint[]) p
                  WHERE e.failing_since <= now() - make_interval(secs => :window::float8 * p / 100)) AS reached
           FROM endpoints e
          WHERE e.status = 'active' AND e.deleted_at IS NULL
            AND e.failing_since <= now() - make_interval(secs => :window::float8 * :lowest / 100)
            AND COALESCE(e.failure_warned_percent, 0) < :highest
            FOR UPDATE OF e SKIP LOCKED)
       UPDATE endpoints e SET failure_warned_percent = due.reached
         FROM due
        WHERE e.id = due.id AND due.reached > COALESCE(due.warned, 0)
          AND e.failure_warned_percent IS NOT DISTINCT FROM due.warned
       RETURNING e.id, e.tenant_id, e.failing_since, due.warned, due.reached`,
      { percents: [...FAILURE_WARNING_PERCENTS], window: autoDisableAfterSeconds, lowest: FAILURE_WARNING_PERCENTS[0], highest: FAILURE_WARNING_PERCENTS.at(-1)! },
    );
    const warned: FailingEndpoint[] = [];
    for (const r of rows) {
      warned.push({
        id: idOfUuid('endpoint', r.id),
        tenantId: idOfUuid('tenant', r.tenant_id),
        failingSince: r.failing_since,
        thresholds: thresholdsToAnnounce(r.warned, r.reached),
        lastError: await lastErrorSince(trx, r.id, r.failing_since),
      });
    }
    return warned;
  });
}

/**
 * The last error of the endpoint's most recently failed delivery in this streak: `deliveries.last_error`,
 * which holds fixed texts and status codes only (the HTTP client never keeps an error's own message,
 * which could carry URLs or headers). Asked at most once per warning, so a few per streak.
 */
async function lastErrorSince(trx: Knex.Transaction, endpointUuid: string, since: Date): Promise<string | null> {
  const row: { last_error: string } | undefined = await trx('deliveries')
    .where({ endpoint_id: endpointUuid })
    .whereNotNull('last_error')
    .where('updated_at', '>=', since)
    .orderBy('updated_at', 'desc')
    .first('last_error');
  return row?.last_error ?? null;
}
