import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { answer } from '../helpers/replay.js';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { watchAnnouncements, type AnnouncementWatch } from '../helpers/announcements.js';
import { sentBody } from '../helpers/database.js';

/**
 * The platform tells a tenant about its own trouble with events of its own, `platform.delivery.dead`
 * and `platform.endpoint.disabled`, sent through the normal path to endpoints that ask for them,
 * and never about a delivery of such an event (no loops).
 */
describe('operational events', () => {
  let t: TestPlatform;
  let watch: AnnouncementWatch;
  const receivers: Receiver[] = [];
  const receiver = async (status = 200) => {
    const r = await startReceiver(answer(status));
    receivers.push(r);
    return r;
  };
  const typeOf = (req: ReceivedRequest) => (JSON.parse(req.body) as { type: string }).type;
  const ofType = (r: Receiver, type: string) => r.requests.filter((req) => typeOf(req) === type).map((req) => ({ req, body: JSON.parse(req.body) }));
  // Rows store the uuid a tenant's TypeID encodes.
  const platformEvents = async (tenantId: string) =>
    t.platform.db('events').where({ tenant_id: uuidOf('tenant', tenantId) }).where('type', 'like', 'platform.%').orderBy('id').select('id', 'type', 'origin', sentBody(t.platform.db));
  /** Every delivery of the tenant finished (none waiting or in flight). */
  const quiet = (tenantId: string) =>
    eventually(async () => {
      const busy = await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', tenantId) }).whereIn('status', UNFINISHED_STATUSES).count({ n: '*' });
      return Number(busy[0]!.n) === 0;
    }, 'all deliveries settled');
  /** The tenant's deliveries that an attempt made dead: each one goes through the operational-event step. */
  const deadByAttempt = async (tenantId: string): Promise<string[]> =>
    (await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', tenantId), status: 'dead', dead_reason: 'terminal' }).pluck('id')).map((id: string) => idOfUuid('delivery', id));

  beforeAll(async () => {
    t = await startTestPlatform();
    watch = watchAnnouncements(t.platform);
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await t.stop();
  });

  describe('subscribers', () => {
    let tenant: TestTenant;
    let all: Receiver;
    let exact: Receiver;
    let catchAll: Receiver;
    let allSecret: string;

    beforeAll(async () => {
      tenant = await t.createTenant('ops');
      all = await receiver();
      exact = await receiver();
      catchAll = await receiver();
      allSecret = (await createEndpoint(tenant, { url: `${all.url}/ops`, eventTypes: ['platform.*'] })).secret;
      await createEndpoint(tenant, { url: `${exact.url}/dead-only`, eventTypes: ['platform.delivery.dead'] });
      await createEndpoint(tenant, { url: `${catchAll.url}/everything` });
    });

    it('sends platform.delivery.dead when another endpoint answers a terminal 400, naming the delivery, event and reason', async () => {
      const failing = await receiver(400);
      const failingEp = (await createEndpoint(tenant, { url: `${failing.url}/strict`, eventTypes: ['order.*'] })).id;
      const eventId = await publish(tenant, 'order.created');
      const dead = await eventually(async () => {
        const list = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}&endpointId=${failingEp}`);
        return list.body.data[0]?.status === 'dead' && list.body.data[0];
      }, 'the order delivery is dead');

      const [toAll] = await eventually(async () => ofType(all, 'platform.delivery.dead').length > 0 && ofType(all, 'platform.delivery.dead'), 'platform.delivery.dead at platform.*');
      const [toExact] = await eventually(async () => ofType(exact, 'platform.delivery.dead').length > 0 && ofType(exact, 'platform.delivery.dead'), 'platform.delivery.dead at the exact subscriber');
      expect(toAll!.body).toMatchObject({
        type: 'platform.delivery.dead',
        id: toAll!.req.headers['webhook-id'],
        data: { deliveryId: dead.id, eventId, eventType: 'order.created', endpointId: failingEp, reason: 'terminal', lastStatusCode: 400, attempts: 1 },
      });
      // The same event (one webhook-id, one body) to both subscribers, signed like any delivery.
      expect(toExact!.req.headers['webhook-id']).toBe(toAll!.req.headers['webhook-id']);
      expect(toExact!.req.body).toBe(toAll!.req.body);
      new Webhook(allSecret).verify(toAll!.req.body, {
        'webhook-id': String(toAll!.req.headers['webhook-id']),
        'webhook-timestamp': String(toAll!.req.headers['webhook-timestamp']),
        'webhook-signature': String(toAll!.req.headers['webhook-signature']),
      });

      const listed = await tenant.call('GET', '/v1/events?type=platform.delivery.dead');
      expect(listed.body.data).toEqual([expect.objectContaining({ id: toAll!.req.headers['webhook-id'], origin: 'platform', type: 'platform.delivery.dead' })]);
      await quiet(tenant.id);
      expect(catchAll.requests.map(typeOf)).toEqual(['order.created']);
    });

    it('sends platform.endpoint.disabled when an endpoint answers 410, only to subscribers of that type', async () => {
      const gone = await receiver(410);
      const goneEp = (await createEndpoint(tenant, { url: `${gone.url}/gone`, eventTypes: ['gone.*'] })).id;
      const eventId = await publish(tenant, 'gone.away');
      const disabled = await eventually(async () => ofType(all, 'platform.endpoint.disabled')[0], 'platform.endpoint.disabled at platform.*');
      expect(disabled.body.data).toEqual({ endpointId: goneEp, reason: expect.stringContaining('410') });
      const endpoint = await tenant.call('GET', `/v1/endpoints/${goneEp}`);
      expect(endpoint.body).toMatchObject({ status: 'disabled', disabledReason: expect.stringContaining('410') });

      // The 410 also killed the delivery itself, which is announced like any dead delivery.
      const deadOfGone = await eventually(async () => ofType(exact, 'platform.delivery.dead').find((x) => x.body.data.eventId === eventId), 'dead delivery of the 410 announced');
      expect(deadOfGone.body.data).toMatchObject({ endpointId: goneEp, reason: 'terminal', lastStatusCode: 410 });
      await quiet(tenant.id);
      expect(ofType(exact, 'platform.endpoint.disabled')).toEqual([]);
      expect(catchAll.requests.map(typeOf).filter((type) => type.startsWith('platform.'))).toEqual([]);
      expect(catchAll.requests.map(typeOf)).toContain('gone.away');
    });
  });

  it('announces an endpoint disabled once, even when several requests in flight all answer 410', async () => {
    const tenant = await t.createTenant('many-410');
    const listener = await receiver();
    await createEndpoint(tenant, { url: `${listener.url}/ops`, eventTypes: ['platform.endpoint.disabled'] });
    // Holds requests until four are in flight, then answers all of them (and any later one) 410.
    const held: Array<import('node:http').ServerResponse> = [];
    const gone = await receiver();
    gone.setResponder((_req, res) => {
      held.push(res);
      if (held.length >= 4) for (const r of held.splice(0)) r.writeHead(410).end();
    });
    const goneEp = (await createEndpoint(tenant, { url: `${gone.url}/gone`, eventTypes: ['gone.*'], maxConcurrency: 4 })).id;
    for (let i = 0; i < 4; i++) await publish(tenant, 'gone.away');
    await eventually(async () => listener.requests.length > 0, 'platform.endpoint.disabled at the listener');
    await quiet(tenant.id);
    // Every 410 has been through the step that would announce a second disable.
    const deadOfGone = await deadByAttempt(tenant.id);
    expect(deadOfGone).toHaveLength(4);
    await watch.announced(deadOfGone);
    await quiet(tenant.id);

    expect(gone.requests).toHaveLength(4);
    expect((await platformEvents(tenant.id)).map((e) => e.type)).toEqual(['platform.endpoint.disabled']);
    expect(listener.requests).toHaveLength(1);
    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${goneEp}&action=endpoint.auto_disabled`);
    expect(audit.body.data).toHaveLength(1);
  });

  it('refuses platform.* types from the tenant API, so subscribers can trust where they come from', async () => {
    const tenant = await t.createTenant('spoofer');
    const listener = await receiver();
    await createEndpoint(tenant, { url: `${listener.url}/ops`, eventTypes: ['platform.*'] });
    for (const type of ['platform.delivery.dead', 'platform.endpoint.disabled', 'platform.anything']) {
      const res = await tenant.call('POST', '/v1/events', { body: { type, data: { deliveryId: 'dlv_fake' } } });
      expect({ type, status: res.status, code: res.body.error?.code }).toEqual({ type, status: 400, code: 'validation_failed' });
    }
    // Only the exact prefix is reserved.
    expect((await tenant.call('POST', '/v1/events', { body: { type: 'platformer.level', data: {} } })).status).toBe(202);
    expect(await platformEvents(tenant.id)).toEqual([]);
  });

  it('publishes nothing when no endpoint subscribes', async () => {
    const tenant = await t.createTenant('nobody-listens');
    const everything = await receiver();
    const failing = await receiver(400);
    await createEndpoint(tenant, { url: `${everything.url}/everything` });
    await createEndpoint(tenant, { url: `${failing.url}/strict`, eventTypes: ['order.*'] });
    await publish(tenant, 'order.created');
    await quiet(tenant.id);
    // Operational events are published right after the dead letter is recorded: wait for that step.
    const dead = await deadByAttempt(tenant.id);
    expect(dead).toHaveLength(1);
    await watch.announced(dead);
    expect(failing.requests).toHaveLength(1);
    expect(await platformEvents(tenant.id)).toEqual([]);
    expect(everything.requests.map(typeOf)).toEqual(['order.created']);
  });

  it('does not loop: a subscriber that fails terminally on platform events causes no further ones', async () => {
    const tenant = await t.createTenant('loop-400');
    // Subscribed to its own failures and failing on everything: the worst case for a loop.
    const broken = await receiver(400);
    const brokenEp = (await createEndpoint(tenant, { url: `${broken.url}/broken`, eventTypes: ['order.*', 'platform.*'] })).id;
    const orders = [await publish(tenant, 'order.created'), await publish(tenant, 'order.created'), await publish(tenant, 'order.created')];
    await eventually(async () => (await platformEvents(tenant.id)).length >= 3, 'three platform.delivery.dead events');
    await quiet(tenant.id);
    // Every death has been through the operational-event step, and a whole sweep has run since:
    // nothing more has appeared.
    await watch.announced(await deadByAttempt(tenant.id));
    await watch.fullSweep();
    await quiet(tenant.id);

    const events = await platformEvents(tenant.id);
    expect(events.map((e) => e.type)).toEqual(['platform.delivery.dead', 'platform.delivery.dead', 'platform.delivery.dead']);
    expect(events.map((e) => JSON.parse(e.body).data.eventId).sort()).toEqual([...orders].sort());
    const deliveries = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', brokenEp) }).select('status', 'dead_reason');
    expect(deliveries).toHaveLength(6);
    expect(deliveries.every((d) => d.status === 'dead' && d.dead_reason === 'terminal')).toBe(true);
    expect(broken.requests).toHaveLength(6);
  });

  it('does not loop: a subscriber disabled by its own 410 to a platform event causes one endpoint.disabled and stops', async () => {
    const tenant = await t.createTenant('loop-410');
    const failing = await receiver(400);
    const gone = await receiver(410);
    await createEndpoint(tenant, { url: `${failing.url}/strict`, eventTypes: ['order.*'] });
    const goneEp = (await createEndpoint(tenant, { url: `${gone.url}/gone`, eventTypes: ['platform.*'] })).id;
    await publish(tenant, 'order.created');
    await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${goneEp}`)).body.status === 'disabled', 'the subscriber disabled by its 410');
    await eventually(async () => (await platformEvents(tenant.id)).length >= 2, 'the endpoint.disabled event');
    await quiet(tenant.id);
    await watch.announced(await deadByAttempt(tenant.id));
    await watch.fullSweep();
    await quiet(tenant.id);

    const events = await platformEvents(tenant.id);
    expect(events.map((e) => e.type)).toEqual(['platform.delivery.dead', 'platform.endpoint.disabled']);
    expect(events.every((e) => e.origin === 'platform')).toBe(true);
    // The only subscriber is the disabled endpoint: the second event is kept for it as a dead letter, unsent.
    const toGone = await t.platform.db('deliveries').where({ endpoint_id: uuidOf('endpoint', goneEp) }).orderBy('id').select('status', 'dead_reason');
    expect(toGone).toEqual([
      { status: 'dead', dead_reason: 'terminal' },
      { status: 'dead', dead_reason: 'endpoint_disabled' },
    ]);
    expect(gone.requests).toHaveLength(1);
  });
});
