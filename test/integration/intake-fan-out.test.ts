import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { createDb } from '../../src/infra/db.js';
import { initialDeliveryIdGuess } from '../../src/store/delivery-ids.js';
import { publish } from '../helpers/api.js';
import { createEndpoint, createSource, expectOutcome, postCallback, readMetrics, rowsOfEvent, sampleOf, sign, type TestSource } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

/**
 * Which endpoints an accepted callback reaches, seen at real receivers with the dispatcher running
 * (role `all`): filters with `.*` prefixes, and disabled endpoints that must get a dead delivery
 * (replayable later) but never a request.
 */

let t: TestPlatform;
let tenant: TestTenant;
let source: TestSource;
const receivers = {} as Record<'all' | 'orders' | 'exact' | 'disabled', Receiver>;
const endpoints = {} as Record<keyof typeof receivers, string>;

beforeAll(async () => {
  t = await startTestPlatform();
  tenant = await t.createTenant('fan-out');
  source = await createSource(tenant, 'momo-automation');
  for (const name of ['all', 'orders', 'exact', 'disabled'] as const) receivers[name] = await startReceiver();
  endpoints.all = await createEndpoint(tenant, `${receivers.all.url}/all`);
  endpoints.orders = await createEndpoint(tenant, `${receivers.orders.url}/orders`, ['order.*']);
  endpoints.exact = await createEndpoint(tenant, `${receivers.exact.url}/exact`, ['order.created']);
  endpoints.disabled = await createEndpoint(tenant, `${receivers.disabled.url}/disabled`);
  const patched = await tenant.call('PATCH', `/v1/endpoints/${endpoints.disabled}`, { body: { status: 'disabled' } });
  expect(patched.status, patched.text).toBe(200);
  expect(patched.body.status).toBe('disabled');
});
afterAll(async () => {
  await t?.stop();
  await Promise.all(Object.values(receivers).map((r) => r.close()));
});

async function accept(event: string, to: TestSource = source): Promise<string> {
  const body = automation.body(randomUUID(), event);
  return expectOutcome(await postCallback(t, to.id, sign.automation(to.secret, body)), 'accepted').eventId;
}

const received = (name: keyof typeof receivers, eventId: string) => receivers[name].requests.filter((r) => r.headers['webhook-id'] === eventId);

describe('fan-out of an accepted callback', () => {
  it('reaches the catch-all, the `order.*` prefix and the exact filter; a disabled endpoint gets a dead delivery and no request', async () => {
    const deadBefore = sampleOf(await readMetrics(t.url), 'webhook_deliveries_dead_lettered_total', { reason: 'endpoint_disabled' });
    const eventId = await accept('order.created');

    const rows = await rowsOfEvent(t.platform.db, eventId);
    const disabled = rows.deliveries.find((d) => d.endpoint_id === endpoints.disabled);
    expect(disabled).toEqual({ endpoint_id: endpoints.disabled, status: 'dead', dead_reason: 'endpoint_disabled' });
    expect(rows.deliveries).toHaveLength(4);

    // Dispatch demonstrably ran for this event: the three active endpoints each got it once.
    await eventually(async () => ['all', 'orders', 'exact'].every((n) => received(n as 'all', eventId).length === 1), 'the three active endpoints received it');
    const list = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}`);
    expect(list.status).toBe(200);
    const byEndpoint = Object.fromEntries((list.body.data as Array<{ endpointId: string; status: string; deadReason: string | null; attemptCount: number }>).map((d) => [d.endpointId, d]));
    await eventually(async () => {
      const again = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}&status=succeeded`);
      return again.body.data.length === 3;
    }, 'three deliveries succeeded');
    expect(byEndpoint[endpoints.disabled]).toMatchObject({ status: 'dead', deadReason: 'endpoint_disabled', attemptCount: 0 });
    expect(receivers.disabled.requests).toHaveLength(0);
    const attempts = await attemptsListed(t.platform.db).join('deliveries', 'attempts.delivery_id', t.platform.db.raw("typeid_of('dlv', deliveries.id)")).where('deliveries.endpoint_id', uuidOf('endpoint', endpoints.disabled)).count<{ count: number }[]>('* as count');
    expect(attempts[0]!.count).toBe(0);
    expect(sampleOf(await readMetrics(t.url), 'webhook_deliveries_dead_lettered_total', { reason: 'endpoint_disabled' }) - deadBefore).toBe(1);
  });

  it('matches `order.*` only on the `order.` prefix, and an exact filter only on its type', async () => {
    const updated = await accept('order.updated');
    const orderbook = await accept('orderbook.updated');
    const endpointsOf = async (eventId: string) =>
      (await rowsOfEvent(t.platform.db, eventId)).deliveries.filter((d) => d.status !== 'dead').map((d) => d.endpoint_id).sort();
    expect(await endpointsOf(updated)).toEqual([endpoints.all, endpoints.orders].sort());
    expect(await endpointsOf(orderbook)).toEqual([endpoints.all]);
    await eventually(async () => received('all', orderbook).length === 1 && received('orders', updated).length === 1, 'deliveries arrived');
    expect(received('orders', orderbook)).toHaveLength(0);
    expect(received('exact', updated)).toHaveLength(0);
  });

  it('an endpoint enabled again receives new events', async () => {
    const patched = await tenant.call('PATCH', `/v1/endpoints/${endpoints.disabled}`, { body: { status: 'active' } });
    expect(patched.status, patched.text).toBe(200);
    const eventId = await accept('order.created');
    await eventually(async () => received('disabled', eventId).length === 1, 'the re-enabled endpoint received the event');
    // What was dead-lettered while it was off stays so (it takes a replay), it is not sent on its own.
    expect(receivers.disabled.requests.map((r) => r.headers['webhook-id'])).toEqual([eventId]);
  });
});

/**
 * How many delivery ids an event needs is only known once its endpoints are matched in the
 * database; the api process guesses from the previous event of the tenant and type and, when the
 * guess is short, makes as many as it is told and calls again. Whatever the guess, every matching
 * endpoint gets exactly one delivery.
 */
describe('fan-out to more endpoints than delivery ids were guessed', () => {
  const other = {} as { receiver: Receiver };
  beforeAll(async () => {
    other.receiver = await startReceiver();
  });
  afterAll(async () => {
    await other.receiver?.close();
  });

  interface DeliveryRow {
    id: string;
    endpoint_id: string;
    status: string;
    dead_reason: string | null;
    deadline_at: Date;
  }
  /** An event as its rows name it: the uuid its TypeID encodes. */
  const eventKey = (eventId: string) => uuidOf('event', eventId);
  const deliveriesOf = async (eventId: string): Promise<DeliveryRow[]> =>
    (await t.platform.db('deliveries').where({ event_id: eventKey(eventId) }).orderBy('endpoint_id').select('id', 'endpoint_id', 'status', 'dead_reason', 'deadline_at'))
      .map((d: DeliveryRow) => ({ ...d, id: idOfUuid('delivery', d.id), endpoint_id: idOfUuid('endpoint', d.endpoint_id) }));
  const arrivals = (eventId: string) => other.receiver.requests.filter((r) => r.headers['webhook-id'] === eventId).map((r) => r.path).sort();

  /** One delivery per endpoint, each with its own id, made as a TypeID's (a UUIDv7); the disabled ones dead, the others sent once. */
  async function expectOneEach(eventId: string, active: string[], disabled: string[] = []): Promise<DeliveryRow[]> {
    const rows = await deliveriesOf(eventId);
    expect(rows.map((d) => d.endpoint_id)).toEqual([...active, ...disabled].sort());
    expect(new Set(rows.map((d) => d.id)).size).toBe(rows.length);
    const stored: string[] = await t.platform.db('deliveries').where({ event_id: eventKey(eventId) }).pluck('id');
    for (const id of stored) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const d of rows.filter((r) => disabled.includes(r.endpoint_id))) expect(d).toMatchObject({ status: 'dead', dead_reason: 'endpoint_disabled' });
    for (const d of rows.filter((r) => active.includes(r.endpoint_id))) expect(d.dead_reason).toBeNull();
    return rows;
  }

  it('seven endpoints, one disabled, one with its own maximum age: each gets exactly one delivery, from a callback and from the API', async () => {
    // The first event of this tenant runs with the initial guess, which is too short here.
    expect(7).toBeGreaterThan(initialDeliveryIdGuess);
    const wide = await t.createTenant('wide');
    const wideSource = await createSource(wide, 'momo-automation');
    const paths = Array.from({ length: 7 }, (_, i) => `/wide-${i}`);
    const ids: string[] = [];
    for (const path of paths.slice(0, 6)) ids.push(await createEndpoint(wide, `${other.receiver.url}${path}`));
    const aged = await wide.call('POST', '/v1/endpoints', { body: { url: `${other.receiver.url}${paths[6]}`, retryPolicy: { maxEventAgeSeconds: 600 } } });
    expect(aged.status, aged.text).toBe(201);
    ids.push(aged.body.id as string);
    const off = await wide.call('PATCH', `/v1/endpoints/${ids[0]}`, { body: { status: 'disabled' } });
    expect(off.status, off.text).toBe(200);
    const [disabled, ...active] = ids;

    const first = await accept('order.created', wideSource);
    const rows = await expectOneEach(first, active, [disabled!]);
    const event = await t.platform.db('events').where({ id: eventKey(first) }).first('created_at');
    const deadline = (endpointId: string) => rows.find((d) => d.endpoint_id === endpointId)!.deadline_at.getTime() - event.created_at.getTime();
    expect(deadline(aged.body.id)).toBe(600_000);
    expect(deadline(active[0]!)).toBe(t.config.retry.maxEventAgeSeconds * 1000);
    // Now the guess is right: the next callback of the type, and a published event of a type this
    // tenant has not sent before (short guess again), fan out the same way.
    const second = await accept('order.created', wideSource);
    await expectOneEach(second, active, [disabled!]);
    const published = await publish(wide, { type: 'invoice.paid', messageId: 'inv-1' });
    await expectOneEach(published, active, [disabled!]);

    const sent = paths.slice(1).sort();
    await eventually(async () => [first, second, published].every((id) => arrivals(id).length === sent.length), 'every active endpoint received all three');
    for (const id of [first, second, published]) expect(arrivals(id)).toEqual(sent);
    expect(other.receiver.requests.filter((r) => r.path === paths[0])).toHaveLength(0);
  });

  it('a tenant whose endpoints grow, then shrink, between two callbacks: each callback reaches exactly the endpoints it had', async () => {
    const growing = await t.createTenant('growing');
    const growingSource = await createSource(growing, 'momo-automation');
    const ids = [await createEndpoint(growing, `${other.receiver.url}/grow-0`), await createEndpoint(growing, `${other.receiver.url}/grow-1`)];
    const before = await accept('order.paid', growingSource);
    await expectOneEach(before, ids);

    for (let i = 2; i < 8; i++) ids.push(await createEndpoint(growing, `${other.receiver.url}/grow-${i}`));
    const grown = await accept('order.paid', growingSource);
    await expectOneEach(grown, ids);
    // Deleting an endpoint dead-letters what it has not received yet: let this fan-out arrive first.
    await eventually(async () => arrivals(grown).length === 8, 'the grown fan-out arrived');
    expect(arrivals(grown)).toEqual(Array.from({ length: 8 }, (_, i) => `/grow-${i}`).sort());

    for (const id of ids.splice(0, 5)) expect((await growing.call('DELETE', `/v1/endpoints/${id}`)).status).toBe(204);
    const shrunk = await accept('order.paid', growingSource);
    await expectOneEach(shrunk, ids);
    await eventually(async () => arrivals(shrunk).length === 3, 'the shrunk fan-out arrived');
    expect(arrivals(shrunk)).toEqual(['/grow-5', '/grow-6', '/grow-7']);
    expect(arrivals(before)).toEqual(['/grow-0', '/grow-1']);
  });
});

describe('fan-out when one tenant owns nearly every endpoint', () => {
  it("another tenant's events find their endpoints by index, without scanning the big tenant's", async () => {
    const big = await t.createTenant('big');
    const small = await t.createTenant('small');
    const mine = await createEndpoint(small, 'http://127.0.0.1:9/small');
    const template = await createEndpoint(big, 'http://127.0.0.1:9/big', ['never.sent']);
    await t.platform.db.raw(
      `INSERT INTO endpoints (id, tenant_id, url, event_types, secret_enc, max_concurrency)
       SELECT gen_random_uuid(), tenant_id, url, event_types, secret_enc, 1
         FROM generate_series(1, 100000) g, endpoints WHERE id = ?`,
      [uuidOf('endpoint', template)],
    );
    await t.platform.db.raw('ANALYZE endpoints');
    // In one transaction on a connection of its own, so its scan counters say how fan-out read the
    // table: a pooled connection of the platform's may carry counters of the platform's own
    // statements that PostgreSQL has not flushed yet. More calls than PostgreSQL's five custom plans
    // before it may switch to a generic one.
    const own = createDb({ url: t.database.url, poolMax: 1 });
    const scans = await own.transaction(async (trx) => {
      for (let i = 0; i < 8; i++) {
        // The form intake and publishing call (the body is for content filters; none here), with the
        // tenant's uuid as text, as they pass it.
        const { rows } = await trx.raw('SELECT cardinality(fan_out_targets(:tenant, :type, NULL)) AS n', { tenant: uuidOf('tenant', small.id), type: 'order.created' });
        expect(rows[0].n).toBe(1);
      }
      const { rows } = await trx.raw(`SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'endpoints'`);
      return rows[0] as { seq_scan: string; idx_scan: string };
    }).finally(() => own.destroy());
    // No call read the table sequentially (the big tenant's 100,000 rows); each found its one
    // endpoint through an index. The index count is a floor, not exact: under load the counter
    // has been seen one short of the calls.
    expect(Number(scans.seq_scan)).toBe(0);
    expect(Number(scans.idx_scan)).toBeGreaterThanOrEqual(1);
    expect(mine).toBeTruthy();
  });
});
