// The invariant checker must itself be able to fail: each rule is shown catching a hand-built bad
// state, and only that rule firing, on a private database. Keys are unique in event_keys, which the
// intake functions claim and these direct inserts bypass, so even "two events share a dedupe key"
// can be built. Each case gets its own tenant and the checker looks at that tenant only.
import type { Knex } from 'knex';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, newId, uuidOf } from '../../src/domain/ids.js';
import { createDb } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase, sentBody, storedAttempt } from '../helpers/database.js';
import { checkInvariants, filterMatches, inspect, type RecordingReceiver, type ViolationKind } from '../helpers/invariants.js';
import type { ReceivedRequest } from '../helpers/receiver.js';

let database: TestDatabase;
let db: Knex;

beforeAll(async () => {
  database = await createTestDatabase();
  db = createDb({ url: database.url, poolMax: 4 });
});
afterAll(async () => {
  await db?.destroy();
  await database?.drop();
});

interface World {
  tenantId: string;
  sourceId: string;
  /** Receiver A (catch-all endpoint) and B (`order.*` endpoint). */
  a: RecordingReceiver;
  b: RecordingReceiver;
  ids: Record<'epA' | 'epB' | 'e1' | 'e2' | 'stale' | 'd1' | 'd2' | 'd3', string>;
  metrics: { success: number; retry: number; terminal: number; accepted: number; duplicate: number; stale: number };
  metricsText(): string[];
  request(deliveryId: string, eventId: string, body?: string, attempt?: number): ReceivedRequest;
}

let port = 40_000;
/**
 * A consistent state: e1 (order.created) succeeded at A and dead after a 500 at B; e2
 * (invoice.paid) succeeded at A; a stale event with no delivery; an endpoint created after the
 * events and one deleted before them (neither owed anything); receipts and metrics that agree.
 */
async function world(): Promise<World> {
  const tenantId = newId('tenant');
  // Rows store the uuid the tenant's TypeID encodes; the checker is given the TypeID.
  const tenantKey = uuidOf('tenant', tenantId);
  const sourceId = newId('source');
  const a: RecordingReceiver = { url: `http://127.0.0.1:${++port}`, requests: [] };
  const b: RecordingReceiver = { url: `http://127.0.0.1:${++port}`, requests: [] };
  const hourAgo = new Date(Date.now() - 3_600_000);
  const ids = {
    epA: newId('endpoint'), epB: newId('endpoint'), e1: newId('event'), e2: newId('event'), stale: newId('event'),
    d1: newId('delivery'), d2: newId('delivery'), d3: newId('delivery'),
  };
  await db('tenants').insert({ id: tenantKey, name: 'checker' });
  await db('sources').insert({ id: sourceId, tenant_id: tenantKey, type: 'momo-automation', name: 's', secret_enc: 'x' });
  const endpoint = (id: string, url: string, eventTypes: string[], extra: Record<string, unknown> = {}) =>
    ({ id: uuidOf('endpoint', id), tenant_id: tenantKey, url, event_types: eventTypes, max_concurrency: 10, secret_enc: 'x', created_at: hourAgo, ...extra });
  await db('endpoints').insert([
    endpoint(ids.epA, `${a.url}/hook`, []),
    endpoint(ids.epB, `${b.url}/orders`, ['order.*']),
    endpoint(newId('endpoint'), `${a.url}/late`, [], { created_at: new Date(Date.now() + 3_600_000) }),
    endpoint(newId('endpoint'), `${a.url}/gone`, [], { deleted_at: new Date(Date.now() - 60_000) }),
  ]);
  // Events are stored under the uuid their TypeID encodes; bodies, keys and requests name them by the TypeID.
  const event = (id: string, type: string, extra: Record<string, unknown> = {}) =>
    ({ id: uuidOf('event', id), tenant_id: tenantKey, source_id: sourceId, origin: 'callback', type, dedupe_key: `sub:${id}`, body: JSON.stringify({ id, type, data: { n: 1 } }), ...extra });
  await db('events').insert([event(ids.e1, 'order.created'), event(ids.e2, 'invoice.paid'), event(ids.stale, 'order.created', { stale: true })]);
  const delivery = (id: string, eventId: string, endpointId: string) =>
    ({ id: uuidOf('delivery', id), tenant_id: tenantKey, event_id: uuidOf('event', eventId), endpoint_id: uuidOf('endpoint', endpointId), status: 'pending', attempt_count: 1, deadline_at: new Date(Date.now() + 86_400_000) });
  await db('deliveries').insert([delivery(ids.d1, ids.e1, ids.epA), delivery(ids.d2, ids.e1, ids.epB), delivery(ids.d3, ids.e2, ids.epA)]);
  // Each one moves as TRANSITIONS allows (the checker holds the recorded changes to it).
  await db('deliveries').whereIn('id', [ids.d1, ids.d2, ids.d3].map((id) => uuidOf('delivery', id))).update({ status: 'in_flight' });
  await db('deliveries').whereIn('id', [ids.d1, ids.d3].map((id) => uuidOf('delivery', id))).update({ status: 'succeeded' });
  await db('deliveries').where({ id: uuidOf('delivery', ids.d2) }).update({ status: 'dead', dead_reason: 'max_attempts' });
  const attempt = (deliveryId: string, outcome: string, statusCode: number | null, errorClass: string | null = null, n = 1) =>
    storedAttempt(db, { id: newId('attempt'), delivery_id: uuidOf('delivery', deliveryId), attempt_number: n, trigger: n === 1 ? 'initial' : 'retry', started_at: new Date(), duration_ms: 5, status_code: statusCode, outcome, error_class: errorClass });
  await db('attempts').insert([
    attempt(ids.d1, 'success', 200),
    attempt(ids.d2, 'terminal', 500, 'http_500'),
    // A worker that died mid-attempt (its request reached A), then the retry succeeded; the lost
    // attempt is bookkeeping, never counted in the attempts metric.
    attempt(ids.d3, 'retry', null, 'worker_lost', 1),
    attempt(ids.d3, 'success', 204, null, 2),
  ]);
  const receipt = (eventId: string, outcome: string, origin = 'callback') =>
    ({ id: newId('receipt'), tenant_id: tenantKey, source_id: sourceId, event_id: uuidOf('event', eventId), outcome, origin, body_digest: eventId });
  await db('receipts').insert([
    receipt(ids.e1, 'accepted'), receipt(ids.e1, 'duplicate'), receipt(ids.e2, 'accepted'), receipt(ids.stale, 'stale'),
    // Learnt by polling, not by HTTP: not in the inbound metric.
    receipt(ids.e2, 'duplicate', 'reconcile'),
  ]);

  const bodies = new Map<string, string>(
    (await db('events').whereIn('id', [ids.e1, ids.e2, ids.stale].map((id) => uuidOf('event', id))).select('id', sentBody(db)))
      .map((r: { id: string; body: string }) => [idOfUuid('event', r.id), r.body]),
  );
  const request = (deliveryId: string, eventId: string, body = bodies.get(eventId) ?? '{}', attempt = 1): ReceivedRequest => ({
    method: 'POST', path: '/hook', headers: { 'webhook-id': eventId, 'webhook-delivery-id': deliveryId, 'webhook-attempt': String(attempt) }, body, at: Date.now(),
  });
  a.requests.push(request(ids.d1, ids.e1), request(ids.d3, ids.e2, undefined, 1), request(ids.d3, ids.e2, undefined, 2));
  b.requests.push(request(ids.d2, ids.e1));
  const metrics = { success: 2, retry: 0, terminal: 1, accepted: 2, duplicate: 1, stale: 1 };
  return {
    tenantId, sourceId, a, b, ids, metrics, request,
    metricsText: () => {
      // Split over two "processes" to show the sums are taken across them.
      const m = metrics;
      return [
        [
          `webhook_delivery_attempts_total{outcome="success",status_class="2xx"} ${m.success - 1}`,
          `webhook_delivery_attempts_total{outcome="retry",status_class="5xx"} ${m.retry}`,
          `webhook_inbound_receipts_total{source_type="momo-automation",outcome="accepted"} ${m.accepted}`,
          `webhook_inbound_receipts_total{source_type="momo-automation",outcome="rejected_signature"} 7`,
        ].join('\n'),
        [
          `webhook_delivery_attempts_total{outcome="success",status_class="2xx"} 1`,
          `webhook_delivery_attempts_total{outcome="terminal",status_class="5xx"} ${m.terminal}`,
          `webhook_inbound_receipts_total{source_type="momo-automation",outcome="duplicate"} ${m.duplicate}`,
          `webhook_inbound_receipts_total{source_type="momo-communication",outcome="stale"} ${m.stale}`,
        ].join('\n'),
      ];
    },
  };
}

async function kinds(w: World, receivers: RecordingReceiver[] = [w.a, w.b]): Promise<ViolationKind[]> {
  const violations = await checkInvariants({ db, receivers, metricsText: w.metricsText(), tenantIds: [w.tenantId] });
  return [...new Set(violations.map((v) => v.kind))].sort();
}

describe('invariant checker', () => {
  it('finds nothing wrong in a consistent state, and a later or deleted endpoint is owed nothing', async () => {
    const w = await world();
    expect(await kinds(w)).toEqual([]);
  });

  it('filters match the way fan-out does', () => {
    expect(filterMatches([], 'order.created')).toBe(true);
    expect(filterMatches([], 'platform.delivery.dead')).toBe(false);
    expect(filterMatches(['order.*'], 'order.created')).toBe(true);
    expect(filterMatches(['order.*'], 'orders.created')).toBe(false);
    expect(filterMatches(['platform.*'], 'platform.delivery.dead')).toBe(true);
    expect(filterMatches(['invoice.paid'], 'invoice.paid')).toBe(true);
  });

  const cases: Array<[ViolationKind, string, (w: World) => Promise<RecordingReceiver[] | void>]> = [
    ['missing_delivery', 'an endpoint that matched gets no delivery row', async (w) => {
      await db('attempts').where({ delivery_id: uuidOf('delivery', w.ids.d3) }).delete();
      await db('deliveries').where({ id: uuidOf('delivery', w.ids.d3) }).delete();
      w.a.requests.splice(1);
      w.metrics.success--;
    }],
    ['unsettled_delivery', 'a delivery is left pending', async (w) => {
      await db('deliveries').where({ id: uuidOf('delivery', w.ids.d2) }).update({ status: 'pending', dead_reason: null });
    }],
    ['dead_without_reason', 'a dead delivery has no reason', async (w) => {
      // The schema refuses this row (deliveries_dead_has_reason, tested below); the checker must still
      // see it in a database that lacks the constraint, so it is lifted for the one write.
      await db.transaction(async (trx) => {
        await trx.raw('ALTER TABLE deliveries DROP CONSTRAINT deliveries_dead_has_reason');
        await trx('deliveries').where({ id: uuidOf('delivery', w.ids.d2) }).update({ dead_reason: null });
        await trx.raw("ALTER TABLE deliveries ADD CONSTRAINT deliveries_dead_has_reason CHECK ((status = 'dead') = (dead_reason IS NOT NULL)) NOT VALID");
      });
    }],
    ['queue_mismatch', 'the scheduler\'s mirror holds a delivery that already succeeded', async (w) => {
      // Written behind the triggers' back: a scheduler reading the mirror would send it again.
      await db('delivery_queue').insert({ delivery_id: uuidOf('delivery', w.ids.d1), endpoint_id: uuidOf('endpoint', w.ids.epA), tenant_id: uuidOf('tenant', w.tenantId), status: 'pending', next_attempt_at: new Date(), deadline_at: new Date() });
    }],
    ['forbidden_transition', 'a succeeded delivery was dead-lettered, which no entry of TRANSITIONS allows', async (w) => {
      await db('deliveries').where({ id: uuidOf('delivery', w.ids.d3) }).update({ status: 'dead', dead_reason: 'terminal' });
    }],
    ['succeeded_not_received', 'a succeeded delivery never reached its receiver', async (w) => {
      // Recorded as a 2xx without the request arriving would also be attempt_not_received; a
      // success without an HTTP status (not possible today) isolates this rule.
      await db('attempts').where({ delivery_id: uuidOf('delivery', w.ids.d1) }).update({ status_code: null });
      w.a.requests.shift();
    }],
    ['succeeded_without_success_attempt', 'a delivery marked succeeded has no successful attempt', async (w) => {
      await db('attempts').where({ delivery_id: uuidOf('delivery', w.ids.d1) }).update({ outcome: db.raw("array_position(attempt_outcomes(), 'retry')") });
      w.metrics.success--;
      w.metrics.retry++;
    }],
    ['no_receiver', 'a succeeded delivery to an endpoint no receiver stands behind', async (w) => [w.b]],
    ['delivery_for_stale_event', 'a stale event was forwarded', async (w) => {
      await db('deliveries').insert({
        id: uuidOf('delivery', newId('delivery')), tenant_id: uuidOf('tenant', w.tenantId), event_id: uuidOf('event', w.ids.stale), endpoint_id: uuidOf('endpoint', w.ids.epB), status: 'dead', dead_reason: 'terminal', deadline_at: new Date(),
      });
    }],
    ['duplicate_dedupe_key', 'two events share a source dedupe key', async (w) => {
      await db('events').insert({ id: uuidOf('event', newId('event')), tenant_id: uuidOf('tenant', w.tenantId), source_id: w.sourceId, origin: 'callback', type: 'x', dedupe_key: `sub:${w.ids.e1}`, body: '{}', stale: true });
    }],
    ['duplicate_idempotency_key', 'two events share an Idempotency-Key', async (w) => {
      for (let i = 0; i < 2; i++) {
        await db('events').insert({ id: uuidOf('event', newId('event')), tenant_id: uuidOf('tenant', w.tenantId), origin: 'api', type: 'x', idempotency_key: 'k1', body: '{}', stale: true });
      }
    }],
    ['unowed_request', 'a receiver got an event id it was not owed (unknown, stale, or another event’s delivery)', async (w) => {
      w.a.requests.push(w.request(w.ids.d1, newId('event')), w.request(w.ids.d1, w.ids.stale), w.request(w.ids.d3, w.ids.e1));
    }],
    ['wrong_receiver', 'a delivery arrived at another endpoint’s receiver', async (w) => {
      w.a.requests.push(w.request(w.ids.d2, w.ids.e1));
    }],
    ['body_mismatch', 'a retry carried different bytes', async (w) => {
      const retry = w.a.requests[2]!;
      retry.body = retry.body.replace('"n":1', '"n":2');
    }],
    ['unrecorded_request', 'a receiver got a try the platform has no attempt for', async (w) => {
      w.a.requests.push(w.request(w.ids.d1, w.ids.e1, undefined, 2));
    }],
    ['duplicate_send', 'one attempt reached the receiver twice', async (w) => {
      w.a.requests.push(w.request(w.ids.d1, w.ids.e1, undefined, 1));
    }],
    ['attempt_not_received', 'an attempt recorded with an HTTP answer never reached the receiver', async (w) => {
      await db('attempts').insert(storedAttempt(db, {
        id: newId('attempt'), delivery_id: uuidOf('delivery', w.ids.d1), attempt_number: 2, trigger: 'retry', started_at: new Date(), duration_ms: 1, status_code: 503, outcome: 'retry',
      }));
      w.metrics.retry++;
    }],
    ['metric_attempts', 'the attempts counter is below the attempt rows', async (w) => {
      w.metrics.success--;
    }],
    ['metric_attempts', 'the attempts counter exceeds the rows by more than the worker_lost rows can explain', async (w) => {
      // The world has one worker_lost row: one attempt counted by a process whose record was lost is fine, two are not.
      w.metrics.terminal += 2;
    }],
    ['metric_receipts', 'the receipts counter disagrees with the receipt rows', async (w) => {
      await db('receipts').insert({ id: newId('receipt'), tenant_id: uuidOf('tenant', w.tenantId), source_id: w.sourceId, event_id: uuidOf('event', w.ids.e1), outcome: 'duplicate', origin: 'callback', body_digest: 'd' });
    }],
  ];

  it.each(cases)('%s: %s', async (kind, _what, breakIt) => {
    const w = await world();
    const receivers = (await breakIt(w)) ?? undefined;
    expect(await kinds(w, receivers ?? undefined)).toEqual([kind]);
  });

  it('the schema refuses a dead delivery without a reason, and a reason on one that is not dead', async () => {
    const w = await world();
    const refused = async (change: Record<string, unknown>) =>
      db('deliveries').where({ id: uuidOf('delivery', w.ids.d2) }).update(change).then(() => 'accepted', (err: { code?: string }) => err.code);
    expect(await refused({ dead_reason: null })).toBe('23514');
    expect(await refused({ status: 'pending' })).toBe('23514');
    expect(await db('deliveries').where({ id: uuidOf('delivery', w.ids.d2) }).first('status', 'dead_reason')).toMatchObject({ status: 'dead' });
  });

  it('reports the redeliveries a receiver absorbed', async () => {
    const w = await world();
    // d1: two retries after a success whose answer was lost (e.g. timeouts), each recorded.
    for (const n of [2, 3]) {
      await db('attempts').insert(storedAttempt(db, {
        id: newId('attempt'), delivery_id: uuidOf('delivery', w.ids.d1), attempt_number: n, trigger: 'retry', started_at: new Date(), duration_ms: 1, outcome: 'retry', error_class: 'attempt_timeout',
      }));
      w.a.requests.push(w.request(w.ids.d1, w.ids.e1, undefined, n));
    }
    const report = await inspect({ db, receivers: [w.a, w.b], tenantIds: [w.tenantId] });
    expect(report.violations).toEqual([]);
    // d1 three times, d3 twice (the worker_lost attempt had reached the receiver), d2 once.
    expect(report.stats).toMatchObject({ events: 3, staleEvents: 1, deliveries: 3, succeeded: 2, dead: 1, requests: 6, redeliveries: 3, attempts: 5, receipts: 4 });
  });
});
