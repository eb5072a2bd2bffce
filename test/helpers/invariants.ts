/**
 * The platform's promise, checked from the outside after any scenario: the rows in PostgreSQL,
 * the requests the receivers recorded and (optionally) each process's /metrics text must tell one
 * consistent story.
 *
 *   const violations = await checkInvariants({ db: t.platform.db, receivers: [receiver] });
 *   await expectNoViolations({ db, receivers, metricsText: [await metricsOf(t.url)] });
 *
 * What is checked (each rule is a `kind` of Violation):
 * - every accepted (non-stale) event has a delivery for each endpoint that existed and matched its
 *   type when it was accepted (`missing_delivery`), and every delivery is settled: succeeded and
 *   seen by its receiver (`unsettled_delivery`, `succeeded_not_received`,
 *   `succeeded_without_success_attempt`, `no_receiver`), or dead with a reason (`dead_without_reason`);
 * - delivery_queue holds exactly the unfinished deliveries, each as it stands (`queue_mismatch`);
 * - every status change a delivery made (recorded by the test database, see transition-log.ts) is
 *   allowed by some entry of TRANSITIONS, creation included (`forbidden_transition`; a database that
 *   records none is `transitions_not_recorded`);
 * - a stale event is forwarded to nobody (`delivery_for_stale_event`);
 * - no two events share (source, dedupe key) or (tenant, Idempotency-Key)
 *   (`duplicate_dedupe_key`, `duplicate_idempotency_key`);
 * - a receiver saw nothing it was not owed: every request names a delivery of the event in its
 *   webhook-id, to an endpoint at that receiver (`unowed_request`, `wrong_receiver`), with the
 *   event's stored body, byte for byte (`body_mismatch`);
 * - every attempt recorded with an HTTP status really reached the receiver (`attempt_not_received`),
 *   and every request a receiver got is a recorded attempt, sent once: its `webhook-attempt` names
 *   an attempt row of its delivery (`unrecorded_request`; an attempt cut off by a dead worker is
 *   recorded as `worker_lost`) and no attempt number arrived twice (`duplicate_send`);
 * - with metricsText: `webhook_delivery_attempts_total` summed over processes equals the attempt
 *   rows of HTTP tries (`metric_attempts`), and `webhook_inbound_receipts_total` for accepted,
 *   duplicate and stale equals the callback receipts (`metric_receipts`). Counters are per process,
 *   so pass the text of every process that handled traffic, and none that was killed.
 *
 * Matching uses the endpoints' current filters: a test that edits an endpoint's eventTypes after
 * traffic must not use `missing_delivery` for that endpoint's earlier events.
 */
import type { Knex } from 'knex';
import { expect } from 'vitest';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';
import { metricValue } from './dispatch.js';
import type { ReceivedRequest } from './receiver.js';
import { observedTransitions, transitionsAllowing } from './transition-log.js';
import { attemptsListed, sentBody } from './database.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

/** What the checker needs of a receiver: where it listens and what it recorded. */
export interface RecordingReceiver {
  url: string;
  requests: ReceivedRequest[];
}

export interface InvariantInput {
  db: Knex;
  /**
   * The receivers behind the endpoints. A list is matched to endpoints by origin (scheme, host and
   * port of the endpoint URL), so two receivers that listened on the same port one after the other
   * both count; a map names the receiver of each endpoint id explicitly.
   */
  receivers: RecordingReceiver[] | Record<string, RecordingReceiver | RecordingReceiver[]>;
  /** One /metrics text per process that handled the traffic (api and worker), if metrics are checked. */
  metricsText?: string[];
  /** Only these tenants' rows (and metrics are then compared with only these tenants' rows). */
  tenantIds?: string[];
}

export type ViolationKind =
  | 'missing_delivery'
  | 'unsettled_delivery'
  | 'dead_without_reason'
  | 'queue_mismatch'
  | 'forbidden_transition'
  | 'transitions_not_recorded'
  | 'succeeded_not_received'
  | 'succeeded_without_success_attempt'
  | 'no_receiver'
  | 'delivery_for_stale_event'
  | 'duplicate_dedupe_key'
  | 'duplicate_idempotency_key'
  | 'unowed_request'
  | 'wrong_receiver'
  | 'body_mismatch'
  | 'attempt_not_received'
  | 'unrecorded_request'
  | 'duplicate_send'
  | 'metric_attempts'
  | 'metric_receipts';

export interface Violation {
  kind: ViolationKind;
  message: string;
  eventId?: string;
  deliveryId?: string;
  endpointId?: string;
}

/** What was looked at, for the scenario's report. */
export interface InvariantStats {
  events: number;
  staleEvents: number;
  deliveries: number;
  succeeded: number;
  dead: number;
  requests: number;
  /** Requests beyond one per delivery that reached a receiver: the price of at-least-once. */
  redeliveries: number;
  attempts: number;
  receipts: number;
}

export interface InvariantReport {
  violations: Violation[];
  stats: InvariantStats;
}

interface EventRow {
  id: string;
  tenant_id: string;
  type: string;
  stale: boolean;
  body: string;
  created_at: Date;
}
interface EndpointRow {
  id: string;
  tenant_id: string;
  url: string;
  event_types: string[];
  created_at: Date;
  deleted_at: Date | null;
}
interface DeliveryRow {
  id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  dead_reason: string | null;
}

/** The same rule as fan-out (src/domain/fan-out.ts): empty = every type except `platform.*`; `x.*` is a prefix. */
export function filterMatches(eventTypes: string[], type: string): boolean {
  if (eventTypes.length === 0) return !type.startsWith('platform.');
  return eventTypes.some((f) => f === type || (f.endsWith('.*') && type.startsWith(f.slice(0, -1))));
}

const originOf = (url: string) => new URL(url).origin;
const header = (r: ReceivedRequest, name: string) => {
  const v = r.headers[name];
  return Array.isArray(v) ? v[0] : v;
};
const MAX_PER_KIND = 20;

export async function checkInvariants(input: InvariantInput): Promise<Violation[]> {
  return (await inspect(input)).violations;
}

/** Checks every invariant and fails the test with a readable list of what broke; returns the stats. */
export async function expectNoViolations(input: InvariantInput): Promise<InvariantStats> {
  const { violations, stats } = await inspect(input);
  const byKind = new Map<string, Violation[]>();
  for (const v of violations) byKind.set(v.kind, [...(byKind.get(v.kind) ?? []), v]);
  const summary = [...byKind].map(([kind, list]) => `${kind} ×${list.length}:\n  ${list.slice(0, 5).map((v) => v.message).join('\n  ')}`);
  expect(violations.length, `invariant violations:\n${summary.join('\n')}`).toBe(0);
  return stats;
}

export async function inspect(input: InvariantInput): Promise<InvariantReport> {
  const { db } = input;
  // Stored as the uuids their TypeIDs encode.
  const tenantIds = input.tenantIds?.map((id) => uuidOf('tenant', id));
  const scoped = <T extends Knex.QueryBuilder>(q: T, column = 'tenant_id'): T => (tenantIds ? (q.whereIn(column, tenantIds) as T) : q);
  // An attempt's tenant is its delivery's.
  const scopedAttempts = <T extends Knex.QueryBuilder>(q: T): T =>
    tenantIds ? (q.whereIn('delivery_id', db('deliveries').whereIn('tenant_id', tenantIds).select(db.raw("typeid_of('dlv', id)"))) as T) : q;
  const violations: Violation[] = [];
  const counts = new Map<ViolationKind, number>();
  const report = (v: Violation) => {
    const n = (counts.get(v.kind) ?? 0) + 1;
    counts.set(v.kind, n);
    // The count is what matters; a few examples per kind say enough and keep failures readable.
    if (n <= MAX_PER_KIND) violations.push(v);
  };

  // Event and endpoint ids are stored as uuids; requests and receivers name them by the TypeIDs the API gave out.
  const events: EventRow[] = (await scoped(db('events').select('id', 'tenant_id', 'type', 'stale', sentBody(db), 'created_at'))).map(
    (e: EventRow) => ({ ...e, id: idOfUuid('event', e.id) }),
  );
  const endpoints: EndpointRow[] = (await scoped(db('endpoints').select('id', 'tenant_id', 'url', 'event_types', 'created_at', 'deleted_at'))).map(
    (e: EndpointRow) => ({ ...e, id: idOfUuid('endpoint', e.id) }),
  );
  const deliveries: DeliveryRow[] = (await scoped(db('deliveries').select('id', 'event_id', 'endpoint_id', 'status', 'dead_reason'))).map(
    (d: DeliveryRow) => ({ ...d, id: idOfUuid('delivery', d.id), event_id: idOfUuid('event', d.event_id), endpoint_id: idOfUuid('endpoint', d.endpoint_id) }),
  );
  const successes = new Set<string>(
    (await scopedAttempts(attemptsListed(db).where('outcome', 'success').distinct('delivery_id'))).map((r: { delivery_id: string }) => r.delivery_id),
  );
  // Attempts that got an HTTP answer: the receiver must have seen each of them.
  // Every attempt on record, by delivery and number: each request a receiver saw must be one.
  const attemptNumbers = new Set<string>(
    (await scopedAttempts(attemptsListed(db).select('delivery_id', 'attempt_number'))).map((r: { delivery_id: string; attempt_number: number }) => `${r.delivery_id} ${r.attempt_number}`),
  );
  const answeredRows: Array<{ delivery_id: string; n: number | string }> = await scopedAttempts(
    attemptsListed(db).whereNotNull('status_code').select('delivery_id').count({ n: '*' }).groupBy('delivery_id'),
  );
  const answered = new Map(answeredRows.map((r) => [r.delivery_id, Number(r.n)]));

  const eventById = new Map(events.map((e) => [e.id, e]));
  const endpointById = new Map(endpoints.map((e) => [e.id, e]));
  const deliveryById = new Map(deliveries.map((d) => [d.id, d]));
  const deliveryKeys = new Set(deliveries.map((d) => `${d.event_id} ${d.endpoint_id}`));

  // Receivers per endpoint: explicit, or every receiver listening at the endpoint URL's origin.
  const receiversOf = (endpointId: string): RecordingReceiver[] => {
    if (Array.isArray(input.receivers)) {
      const ep = endpointById.get(endpointId);
      if (!ep) return [];
      const origin = originOf(ep.url);
      return input.receivers.filter((r) => originOf(r.url) === origin);
    }
    const r = input.receivers[endpointId];
    return r === undefined ? [] : Array.isArray(r) ? r : [r];
  };
  const allReceivers = Array.isArray(input.receivers) ? input.receivers : [...new Set(Object.values(input.receivers).flat())];

  // Requests by the delivery they name, and which receiver got them.
  const requestsByDelivery = new Map<string, number>();
  const sentAttempts = new Set<string>();
  let requests = 0;
  for (const receiver of allReceivers) {
    for (const req of receiver.requests) {
      requests++;
      const eventId = header(req, 'webhook-id');
      const deliveryId = header(req, 'webhook-delivery-id');
      const d = deliveryId ? deliveryById.get(deliveryId) : undefined;
      const ev = eventId ? eventById.get(eventId) : undefined;
      if (!d || !ev || d.event_id !== ev.id || ev.stale) {
        report({
          kind: 'unowed_request',
          message: `${receiver.url}${req.path} got webhook-id ${eventId} / delivery ${deliveryId}, which is ${
            !ev ? 'no event' : ev.stale ? 'a stale event' : !d ? 'no delivery' : `a delivery of ${d.event_id}`
          }`,
          eventId,
          deliveryId,
        });
        continue;
      }
      if (!receiversOf(d.endpoint_id).includes(receiver)) {
        report({
          kind: 'wrong_receiver',
          message: `delivery ${d.id} (endpoint ${d.endpoint_id}) arrived at ${receiver.url}`,
          eventId,
          deliveryId,
          endpointId: d.endpoint_id,
        });
        continue;
      }
      requestsByDelivery.set(d.id, (requestsByDelivery.get(d.id) ?? 0) + 1);
      const attempt = `${d.id} ${header(req, 'webhook-attempt')}`;
      if (!attemptNumbers.has(attempt)) {
        report({ kind: 'unrecorded_request', message: `delivery ${d.id} arrived with webhook-attempt ${header(req, 'webhook-attempt')}, which is no recorded attempt`, eventId, deliveryId });
      } else if (sentAttempts.has(attempt)) {
        report({ kind: 'duplicate_send', message: `delivery ${d.id} attempt ${header(req, 'webhook-attempt')} arrived more than once`, eventId, deliveryId });
      }
      sentAttempts.add(attempt);
      if (req.body !== ev.body) {
        report({ kind: 'body_mismatch', message: `delivery ${d.id}: body differs from the stored event ${ev.id}`, eventId, deliveryId });
      }
    }
  }

  for (const d of deliveries) {
    const ev = eventById.get(d.event_id);
    const base = { eventId: d.event_id, deliveryId: d.id, endpointId: d.endpoint_id };
    if (ev?.stale) report({ kind: 'delivery_for_stale_event', message: `stale event ${ev.id} has delivery ${d.id}`, ...base });
    if (d.status === 'dead') {
      if (!d.dead_reason) report({ kind: 'dead_without_reason', message: `delivery ${d.id} is dead without a reason`, ...base });
    } else if (d.status === 'succeeded') {
      if (!successes.has(d.id)) report({ kind: 'succeeded_without_success_attempt', message: `delivery ${d.id} succeeded without a success attempt`, ...base });
      if (receiversOf(d.endpoint_id).length === 0) {
        report({ kind: 'no_receiver', message: `no receiver given for endpoint ${d.endpoint_id} (${endpointById.get(d.endpoint_id)?.url})`, ...base });
      } else if (!requestsByDelivery.has(d.id)) {
        report({ kind: 'succeeded_not_received', message: `delivery ${d.id} of ${d.event_id} succeeded but its receiver never saw it`, ...base });
      }
    } else {
      report({ kind: 'unsettled_delivery', message: `delivery ${d.id} of ${d.event_id} is still ${d.status}`, ...base });
    }
    const sent = answered.get(d.id) ?? 0;
    if (sent > 0 && receiversOf(d.endpoint_id).length > 0 && (requestsByDelivery.get(d.id) ?? 0) < sent) {
      report({
        kind: 'attempt_not_received',
        message: `delivery ${d.id}: ${sent} attempts got an HTTP answer, the receiver saw ${requestsByDelivery.get(d.id) ?? 0} requests`,
        ...base,
      });
    }
  }

  // Every endpoint that existed and matched when an event was accepted owes it a delivery row.
  const endpointsOfTenant = new Map<string, EndpointRow[]>();
  for (const ep of endpoints) endpointsOfTenant.set(ep.tenant_id, [...(endpointsOfTenant.get(ep.tenant_id) ?? []), ep]);
  for (const ev of events) {
    if (ev.stale) continue;
    for (const ep of endpointsOfTenant.get(ev.tenant_id) ?? []) {
      const existed = ep.created_at < ev.created_at && (ep.deleted_at === null || ep.deleted_at > ev.created_at);
      if (existed && filterMatches(ep.event_types, ev.type) && !deliveryKeys.has(`${ev.id} ${ep.id}`)) {
        report({ kind: 'missing_delivery', message: `event ${ev.id} (${ev.type}) has no delivery to endpoint ${ep.id}`, eventId: ev.id, endpointId: ep.id });
      }
    }
  }

  // Backed by unique constraints; checked anyway, because the constraint is the promise.
  const { rows: dupDedupe } = await db.raw<{ rows: Array<{ source_id: string; dedupe_key: string; n: number }> }>(
    `SELECT source_id, dedupe_key, count(*)::int AS n FROM events
      WHERE dedupe_key IS NOT NULL ${tenantIds ? 'AND tenant_id = ANY(:tenants)' : ''}
      GROUP BY source_id, dedupe_key HAVING count(*) > 1`,
    { tenants: tenantIds ?? [] },
  );
  for (const r of dupDedupe) report({ kind: 'duplicate_dedupe_key', message: `${r.n} events share source ${r.source_id} dedupe key ${r.dedupe_key}` });
  const { rows: dupIdem } = await db.raw<{ rows: Array<{ tenant_id: string; idempotency_key: string; n: number }> }>(
    `SELECT tenant_id, idempotency_key, count(*)::int AS n FROM events
      WHERE idempotency_key IS NOT NULL ${tenantIds ? 'AND tenant_id = ANY(:tenants)' : ''}
      GROUP BY tenant_id, idempotency_key HAVING count(*) > 1`,
    { tenants: tenantIds ?? [] },
  );
  for (const r of dupIdem) report({ kind: 'duplicate_idempotency_key', message: `${r.n} events share tenant ${r.tenant_id} Idempotency-Key ${r.idempotency_key}` });

  // The scheduler finds work only through delivery_queue, kept by triggers: one row per unfinished
  // delivery, equal to it, and nothing else. A missing row is work nobody will ever pick. A slot's
  // claim is the one difference allowed: kept in the queue row only (claim_in_queue), it makes a
  // pending delivery in flight there, with its attempt number and lease.
  const { rows: queueMismatch } = await db.raw<{ rows: Array<{ id: string; status: string | null; queued: string | null }> }>(
    `SELECT coalesce(d.id, q.delivery_id) AS id, d.status, q.status AS queued
       FROM (SELECT * FROM deliveries WHERE status = ANY(:unfinished) ${tenantIds ? 'AND tenant_id = ANY(:tenants)' : ''}) d
       FULL JOIN (SELECT * FROM delivery_queue ${tenantIds ? 'WHERE tenant_id = ANY(:tenants)' : ''}) q ON q.delivery_id = d.id
      WHERE d.id IS NULL OR q.delivery_id IS NULL
         OR (d.next_attempt_at, d.deadline_at, d.endpoint_id, d.tenant_id, d.order_key, d.order_hint, d.order_seq)
            IS DISTINCT FROM (q.next_attempt_at, q.deadline_at, q.endpoint_id, q.tenant_id, q.order_key, q.order_hint, q.order_seq)
         OR (NOT claim_in_queue(d.status, d.attempt_count, q.status, q.attempt_count)
             AND (d.status, d.lease_until) IS DISTINCT FROM (q.status, q.lease_until))`,
    { tenants: tenantIds ?? [], unfinished: [...UNFINISHED_STATUSES] },
  );
  for (const { id: stored, ...r } of queueMismatch) {
    const id = idOfUuid('delivery', stored);
    report({ kind: 'queue_mismatch', message: `delivery ${id}: ${r.status ?? 'finished or gone'} in deliveries, ${r.queued ?? 'absent'} in delivery_queue`, deliveryId: id });
  }

  // Every status change must be one TRANSITIONS allows: the table is the promise, the log the proof.
  const transitions = await observedTransitions(db, input.tenantIds);
  if (!transitions) report({ kind: 'transitions_not_recorded', message: 'the database records no status changes (see test/helpers/transition-log.ts)' });
  for (const t of transitions ?? []) {
    if (transitionsAllowing(t.from, t.to).length > 0) continue;
    report({ kind: 'forbidden_transition', message: `${t.from ?? '(created)'} → ${t.to} happened ${t.count}× (e.g. delivery ${t.example}); no entry of TRANSITIONS allows it`, deliveryId: t.example });
  }

  // Metrics against rows. Attempt rows of tries whose result never reached the database (a worker
  // lost mid-attempt, a record whose commit was lost with its connection) are the sweeper's
  // bookkeeping (`worker_lost`), not counted as rows; such a try may still have been counted by a
  // process that lived on, so the metric may exceed the rows by at most that many.
  const attemptRows: Array<{ outcome: string; n: number }> = await scopedAttempts(
    attemptsListed(db).whereRaw(`error_class IS DISTINCT FROM 'worker_lost'`).select('outcome').count({ n: '*' }).groupBy('outcome'),
  );
  const lostRows: Array<{ n: number | string }> = await scopedAttempts(attemptsListed(db).where('error_class', 'worker_lost').count({ n: '*' }));
  const lost = Number(lostRows[0]?.n ?? 0);
  const receiptRows: Array<{ outcome: string; n: number }> = await scoped(
    db('receipts').where('origin', 'callback').select('outcome').count({ n: '*' }).groupBy('outcome'),
  );
  const rowCount = (rows: Array<{ outcome: string; n: number | string }>, outcome: string) => Number(rows.find((r) => r.outcome === outcome)?.n ?? 0);
  if (input.metricsText) {
    const sum = (name: string, labels: Record<string, string>) => input.metricsText!.reduce((s, text) => s + metricValue(text, name, labels), 0);
    for (const outcome of ['success', 'retry', 'terminal']) {
      const metric = sum('webhook_delivery_attempts_total', { outcome });
      const rows = rowCount(attemptRows, outcome);
      if (metric < rows || metric > rows + lost) {
        report({ kind: 'metric_attempts', message: `webhook_delivery_attempts_total{outcome="${outcome}"} = ${metric}, attempt rows = ${rows} (+ up to ${lost} worker_lost)` });
      }
    }
    for (const outcome of ['accepted', 'duplicate', 'stale']) {
      const metric = sum('webhook_inbound_receipts_total', { outcome });
      const rows = rowCount(receiptRows, outcome);
      if (metric !== rows) report({ kind: 'metric_receipts', message: `webhook_inbound_receipts_total{outcome="${outcome}"} = ${metric}, callback receipts = ${rows}` });
    }
  }

  for (const [kind, n] of counts) {
    if (n > MAX_PER_KIND) violations.push({ kind, message: `… and ${n - MAX_PER_KIND} more ${kind} violations` });
  }
  const receivedDeliveries = requestsByDelivery.size;
  const owedRequests = [...requestsByDelivery.values()].reduce((a, b) => a + b, 0);
  return {
    violations,
    stats: {
      events: events.length,
      staleEvents: events.filter((e) => e.stale).length,
      deliveries: deliveries.length,
      succeeded: deliveries.filter((d) => d.status === 'succeeded').length,
      dead: deliveries.filter((d) => d.status === 'dead').length,
      requests,
      redeliveries: owedRequests - receivedDeliveries,
      attempts: attemptRows.reduce((s, r) => s + Number(r.n), 0),
      receipts: receiptRows.reduce((s, r) => s + Number(r.n), 0),
    },
  };
}

/** GET /metrics of one process, as text. */
export async function metricsOf(baseUrl: string): Promise<string> {
  const res = await fetch(`${baseUrl}/metrics`);
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}
