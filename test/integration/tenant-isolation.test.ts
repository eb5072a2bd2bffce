import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { publish } from '../helpers/api.js';
import type { ApiResponse } from '../helpers/http.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { standard } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { apiKeyId } from '../helpers/replay.js';
import { attemptsListed } from '../helpers/database.js';

/**
 * Tenant B holds valid credentials and A's ids, and tries every tenant route with them. The list of
 * routes comes from the app's own OpenAPI document, so a route added without an isolation case here
 * fails the first test instead of going untested.
 */

interface Fixture {
  tenant: TestTenant;
  apiKey: string;
  source: string;
  sourceSecret: string;
  endpoint: string;
  event: string;
  callbackEvent: string;
  delivery: string;
  messageId: string;
  replay: string;
  portalSession: string;
  idempotencyKey: string;
  eventBody: { type: string; messageId: string; data: unknown };
}

/** A route with an id in its path: B calling it with A's id must get exactly what an unknown id gets. */
interface IdCase {
  id: (a: Fixture) => string;
  /** Where the owner reads the same resource, to prove the id is real (default: the route itself). */
  ownerPath?: (a: Fixture) => string;
  body?: unknown;
}

/** A list route: B never sees A's rows, and A's ids as filters give an empty page. */
interface ListCase {
  ownIds: (f: Fixture) => string[];
  foreignFilters: (a: Fixture) => string[];
}

const unknownId = 'x_01h455vb4pex5vsknk084sn02q';

const idCases: Record<string, IdCase> = {
  'get /v1/sources/{id}': { id: (a) => a.source },
  'patch /v1/sources/{id}': { id: (a) => a.source, ownerPath: (a) => `/v1/sources/${a.source}`, body: { name: 'stolen' } },
  'delete /v1/sources/{id}': { id: (a) => a.source, ownerPath: (a) => `/v1/sources/${a.source}` },
  'delete /v1/api-keys/{id}': { id: (a) => a.apiKey, ownerPath: () => '/v1/api-keys' },
  'get /v1/endpoints/{id}': { id: (a) => a.endpoint },
  'patch /v1/endpoints/{id}': { id: (a) => a.endpoint, body: { url: 'http://127.0.0.1:9/stolen', status: 'disabled', eventTypes: ['nothing'] } },
  'delete /v1/endpoints/{id}': { id: (a) => a.endpoint },
  'post /v1/endpoints/{id}/secret/rotate': { id: (a) => a.endpoint, ownerPath: (a) => `/v1/endpoints/${a.endpoint}` },
  // The owner's own read of the secret is audited, so the id is proven real where reading writes nothing.
  'get /v1/endpoints/{id}/secret': { id: (a) => a.endpoint, ownerPath: (a) => `/v1/endpoints/${a.endpoint}` },
  'post /v1/endpoints/{id}/test': { id: (a) => a.endpoint, ownerPath: (a) => `/v1/deliveries?endpointId=${a.endpoint}`, body: {} },
  'get /v1/endpoints/{id}/stats': { id: (a) => a.endpoint },
  'post /v1/endpoints/{id}/pause': { id: (a) => a.endpoint, ownerPath: (a) => `/v1/endpoints/${a.endpoint}`, body: { reason: 'not yours' } },
  'post /v1/endpoints/{id}/resume': { id: (a) => a.endpoint, ownerPath: (a) => `/v1/endpoints/${a.endpoint}`, body: {} },
  'post /v1/endpoints/{id}/backfill': {
    id: (a) => a.endpoint,
    ownerPath: (a) => `/v1/endpoints/${a.endpoint}`,
    body: { since: new Date(Date.now() - 3_600_000).toISOString(), reason: 'not yours' },
  },
  'get /v1/events/{id}': { id: (a) => a.event },
  'get /v1/deliveries/{id}': { id: (a) => a.delivery },
  'post /v1/deliveries/{id}/replay': { id: (a) => a.delivery, ownerPath: (a) => `/v1/deliveries/${a.delivery}`, body: { reason: 'not yours' } },
  'get /v1/messages/{messageId}': { id: (a) => a.messageId },
  'get /v1/replays/{id}': { id: (a) => a.replay },
  'delete /v1/portal-sessions/{id}': { id: (a) => a.portalSession, ownerPath: () => '/v1/portal-sessions' },
};

const listCases: Record<string, ListCase> = {
  'get /v1/sources': { ownIds: (f) => [f.source], foreignFilters: () => [] },
  'get /v1/api-keys': { ownIds: (f) => [f.apiKey], foreignFilters: () => [] },
  'get /v1/endpoints': { ownIds: (f) => [f.endpoint], foreignFilters: () => [] },
  'get /v1/events': {
    ownIds: (f) => [f.event, f.callbackEvent],
    foreignFilters: (a) => [`messageId=${a.messageId}`, 'type=a.only', `messageId=${a.messageId}&type=order.created`],
  },
  'get /v1/deliveries': {
    ownIds: (f) => [f.delivery],
    foreignFilters: (a) => [`endpointId=${a.endpoint}`, `eventId=${a.event}`, `eventId=${a.callbackEvent}`, 'eventType=a.only'],
  },
  'get /v1/audit-log': {
    ownIds: (f) => [f.endpoint, f.replay],
    foreignFilters: (a) => [`targetId=${a.endpoint}`, `targetId=${a.replay}`, `targetId=${a.tenant.id}`],
  },
  'get /v1/portal-sessions': { ownIds: (f) => [f.portalSession], foreignFilters: () => [] },
};

/** Summaries take no id and have no pages; their test below checks each tenant counts only its own rows. */
const summaryRoutes = ['get /v1/event-types', 'get /v1/dead-letters/summary'];

/** Creation routes take no id; each has its own test below (what they must not do is touch or reveal the other tenant's rows). */
const createRoutes = ['post /v1/sources', 'post /v1/endpoints', 'post /v1/events', 'post /v1/replays', 'post /v1/api-keys', 'post /v1/portal-sessions'];

describe('tenant isolation', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  let a: Fixture;
  let b: Fixture;

  async function fixture(name: string, onlyType: string): Promise<Fixture> {
    const tenant = await t.createTenant(name);
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: `${name}-src` } });
    const endpoint = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/${name}` } });
    const messageId = `${name}-message`;
    const eventBody = { type: 'order.created', messageId, data: { owner: name } };
    const idempotencyKey = `${name}-key`;
    const event = await publish(tenant, eventBody, idempotencyKey);
    await publish(tenant, { type: onlyType, data: {} });
    const body = JSON.stringify({ type: 'order.updated', data: { owner: name } });
    const callback = await t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, `msg_${name}`, body) });
    expect(callback.status).toBe(200);
    const delivery = await eventually(async () => (await tenant.call('GET', `/v1/deliveries?eventId=${event}`)).body.data[0]?.id as string | undefined, 'delivery listed');
    // A real replay that matches nothing, so it has an id but sends nothing.
    const replay = await tenant.call('POST', '/v1/replays', { body: { filter: { eventType: 'matches.nothing' }, reason: 'fixture' } });
    expect(replay.status).toBe(202);
    const portal = await tenant.call('POST', '/v1/portal-sessions', { body: { endpointIds: [endpoint.body.id] } });
    expect(portal.status).toBe(201);
    return {
      tenant,
      apiKey: await apiKeyId(t, tenant.id),
      source: source.body.id,
      sourceSecret: source.body.secret,
      endpoint: endpoint.body.id,
      event,
      callbackEvent: callback.body.eventId,
      delivery,
      messageId,
      replay: replay.body.id,
      portalSession: portal.body.id,
      idempotencyKey,
      eventBody,
    };
  }

  /** Everything tenant A owns, in every table. */
  async function snapshotOfA(): Promise<unknown> {
    const db = t.platform.db;
    // Rows name their tenant by the uuid its TypeID encodes.
    const tenantKey = uuidOf('tenant', a.tenant.id);
    const tables = ['sources', 'endpoints', 'events', 'receipts', 'deliveries', 'audit_log', 'replays'];
    const out: Record<string, unknown> = {};
    for (const table of tables) out[table] = await db(table).where({ tenant_id: tenantKey }).orderBy('id');
    // An attempt's tenant is its delivery's.
    out.attempts = await attemptsListed(db).whereIn('delivery_id', db('deliveries').where({ tenant_id: tenantKey }).select(db.raw("typeid_of('dlv', id)"))).orderBy('id');
    expect((out.attempts as unknown[]).length).toBeGreaterThan(0);
    out.messages = await db('messages').where({ tenant_id: tenantKey }).orderBy('message_id');
    return out;
  }

  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver();
    a = await fixture('a', 'a.only');
    b = await fixture('b', 'b.only');
    // Let dispatch finish so A's rows stop changing on their own.
    await eventually(async () => {
      return Number((await t.platform.db('deliveries').whereNot({ status: 'succeeded' }).count({ n: '*' }))[0]?.n) === 0;
    }, 'all deliveries succeeded');
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  it('has a case for every tenant route in the OpenAPI document', async () => {
    const doc = await t.call('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    const tenantRoutes: string[] = [];
    for (const [path, operations] of Object.entries(doc.body.paths as Record<string, Record<string, { security?: Array<Record<string, unknown>> }>>)) {
      for (const [method, op] of Object.entries(operations)) {
        if (op.security?.some((s) => 'apiKey' in s)) tenantRoutes.push(`${method} ${path}`);
      }
    }
    const covered = [...Object.keys(idCases), ...Object.keys(listCases), ...summaryRoutes, ...createRoutes];
    expect(tenantRoutes.sort()).toEqual(covered.sort());

    // And none of them answers without a tenant key, or to the admin token.
    for (const route of tenantRoutes) {
      const [method, template] = route.split(' ') as [string, string];
      const path = template.replace(/\{[A-Za-z]+\}/g, 'x_01h455vb4pex5vsknk084sn02q');
      for (const token of [undefined, t.config.adminToken, 'sk_unknown']) {
        const res = await t.call(method.toUpperCase(), path, method === 'get' ? { token } : { token, body: {} });
        expect({ route, token, status: res.status }).toEqual({ route, token, status: 401 });
      }
    }
  });

  for (const [route, c] of Object.entries(idCases)) {
    it(`${route}: another tenant's id answers 404 exactly like an unknown id and changes nothing`, async () => {
      const [method, template] = route.split(' ') as [string, string];
      const path = (id: string) => template.replace(/\{[A-Za-z]+\}/, encodeURIComponent(id));
      const before = await snapshotOfA();

      // A's own id is valid for A, so a 404 for B means scoping, not a wrong id.
      const ownerView = await a.tenant.call('GET', c.ownerPath?.(a) ?? path(c.id(a)));
      expect(ownerView.status).toBe(200);

      const foreign: ApiResponse = await b.tenant.call(method.toUpperCase(), path(c.id(a)), c.body === undefined ? {} : { body: c.body });
      const unknown: ApiResponse = await b.tenant.call(method.toUpperCase(), path(unknownId), c.body === undefined ? {} : { body: c.body });
      expect(foreign.status).toBe(404);
      expect(foreign.body).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
      // No existence oracle: the answer does not reveal that the id exists elsewhere.
      expect(foreign.body).toEqual(unknown.body);
      expect(foreign.text).not.toContain(a.tenant.id);

      expect(await snapshotOfA()).toEqual(before);
    });
  }

  for (const [route, c] of Object.entries(listCases)) {
    it(`${route}: lists only the caller's rows, and the other tenant's ids as filters give an empty page`, async () => {
      const path = route.split(' ')[1]!;
      const own = await b.tenant.call('GET', `${path}?limit=500`);
      expect(own.status).toBe(200);
      const seen = JSON.stringify(own.body);
      for (const id of c.ownIds(b)) expect(seen).toContain(id);
      for (const id of [a.source, a.endpoint, a.event, a.callbackEvent, a.delivery, a.tenant.id]) expect(seen).not.toContain(id);

      for (const filter of c.foreignFilters(a)) {
        const res = await b.tenant.call('GET', `${path}?${filter}`);
        expect({ filter, status: res.status, body: res.body }).toEqual({ filter, status: 200, body: { data: [], nextCursor: null } });
      }
      // The same filters work for their owner, so the empty pages above are not vacuous.
      for (const filter of c.foreignFilters(a)) {
        const res = await a.tenant.call('GET', `${path}?${filter}`);
        expect({ filter, count: res.body.data.length > 0 }).toEqual({ filter, count: true });
      }
    });
  }

  it('get /v1/event-types and get /v1/dead-letters/summary: each tenant counts only its own rows', async () => {
    const refused = await a.tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/refused', eventTypes: ['a.dead'], retryPolicy: { maxAttempts: 1 } } });
    expect(refused.status).toBe(201);
    await publish(a.tenant, { type: 'a.dead', data: {} });
    await eventually(async () => (await a.tenant.call('GET', '/v1/dead-letters/summary')).body.total === 1, "A's delivery dead-lettered");
    const typesOf = async (f: Fixture) => ((await f.tenant.call('GET', '/v1/event-types')).body.data as { type: string }[]).map((e) => e.type);
    expect(await typesOf(a)).toEqual(['a.dead', 'a.only', 'order.created', 'order.updated']);
    expect(await typesOf(b)).toEqual(['b.only', 'order.created', 'order.updated']);
    const types = await b.tenant.call('GET', '/v1/event-types');
    for (const id of [a.event, a.callbackEvent, a.tenant.id]) expect(types.text).not.toContain(id);
    const dead = await b.tenant.call('GET', '/v1/dead-letters/summary');
    expect(dead.body).toMatchObject({ total: 0, byEndpoint: [] });
    expect(dead.text).not.toContain(refused.body.id);
  });

  it("post /v1/events: the other tenant's Idempotency-Key and body make a new event of the caller's own", async () => {
    const before = await snapshotOfA();
    const res = await b.tenant.call('POST', '/v1/events', { body: a.eventBody, headers: { 'idempotency-key': a.idempotencyKey } });
    expect(res.status).toBe(202);
    expect(res.body.id).not.toBe(a.event);
    // Fan-out stays inside the tenant: none of A's endpoints gets B's event. Rows name the event by its uuid.
    const eventKey = uuidOf('event', res.body.id);
    expect(await t.platform.db('deliveries').where({ event_id: eventKey, endpoint_id: uuidOf('endpoint', a.endpoint) })).toHaveLength(0);
    expect(await t.platform.db('deliveries').where({ event_id: eventKey, endpoint_id: uuidOf('endpoint', b.endpoint) })).toHaveLength(1);
    await eventually(async () => receiver.requests.some((r) => r.headers['webhook-id'] === res.body.id), 'delivered to B');
    expect(receiver.requests.filter((r) => r.headers['webhook-id'] === res.body.id).map((r) => r.path)).toEqual(['/b']);
    expect(await snapshotOfA()).toEqual(before);
  });

  it('post /v1/sources and post /v1/endpoints: what one tenant creates the other never sees', async () => {
    const src = await b.tenant.call('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'b-2' } });
    const ep = await b.tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/b-2`, eventTypes: ['never.sent'] } });
    expect([src.status, ep.status]).toEqual([201, 201]);
    const aSources = JSON.stringify((await a.tenant.call('GET', '/v1/sources?limit=500')).body);
    const aEndpoints = JSON.stringify((await a.tenant.call('GET', '/v1/endpoints?limit=500')).body);
    expect(aSources).not.toContain(src.body.id);
    expect(aEndpoints).not.toContain(ep.body.id);
    expect((await a.tenant.call('GET', `/v1/sources/${src.body.id}`)).status).toBe(404);
    expect((await a.tenant.call('GET', `/v1/endpoints/${ep.body.id}`)).status).toBe(404);
  });

  it('post /v1/api-keys: a new key belongs to the caller alone and sees only its rows', async () => {
    const created = await b.tenant.call('POST', '/v1/api-keys', { body: { name: 'b-2' } });
    expect(created.status).toBe(201);
    expect(JSON.stringify((await a.tenant.call('GET', '/v1/api-keys?limit=500')).body)).not.toContain(created.body.id);
    const asB = (path: string) => t.call('GET', path, { token: created.body.key });
    expect((await asB(`/v1/sources/${b.source}`)).status).toBe(200);
    expect((await asB(`/v1/sources/${a.source}`)).status).toBe(404);
  });

  it("post /v1/portal-sessions: the other tenant's endpoint cannot be put in a link's scope", async () => {
    const res = await b.tenant.call('POST', '/v1/portal-sessions', { body: { endpointIds: [a.endpoint] } });
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ path: 'endpointIds.0', message: expect.any(String) }]);
    expect(res.text).not.toContain(a.tenant.id);
    expect((await a.tenant.call('POST', '/v1/portal-sessions', { body: { endpointIds: [a.endpoint] } })).status).toBe(201);
  });

  it("post /v1/replays: the other tenant's endpoint as a filter matches nothing and replays nothing", async () => {
    const before = await snapshotOfA();
    const dry = await b.tenant.call('POST', '/v1/replays', { body: { filter: { status: 'succeeded', endpointId: a.endpoint }, reason: 'peek', dryRun: true } });
    expect(dry.status).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, count: 0, sample: [] });
    const real = await b.tenant.call('POST', '/v1/replays', { body: { filter: { status: 'succeeded', endpointId: a.endpoint }, reason: 'steal' } });
    expect(real.status).toBe(202);
    expect(real.body).toMatchObject({ dryRun: false, count: 0 });
    // The same dry run is not vacuous for the owner.
    const own = await a.tenant.call('POST', '/v1/replays', { body: { filter: { status: 'succeeded', endpointId: a.endpoint }, reason: 'peek', dryRun: true } });
    expect(own.body.count).toBeGreaterThan(0);
    expect(await snapshotOfA()).toEqual(before);
  });

  it("a message id both tenants use shows each tenant only its own events", async () => {
    const shared = 'shared-message-id';
    const aEvent = await publish(a.tenant, { type: 'order.created', messageId: shared });
    const bEvent = await publish(b.tenant, { type: 'order.created', messageId: shared });
    const aView = await a.tenant.call('GET', `/v1/messages/${shared}`);
    const bView = await b.tenant.call('GET', `/v1/messages/${shared}`);
    expect(aView.body.events.map((e: { id: string }) => e.id)).toEqual([aEvent]);
    expect(bView.body.events.map((e: { id: string }) => e.id)).toEqual([bEvent]);
  });

  it("a callback to one tenant's source is delivered only to that tenant's endpoints", async () => {
    const body = JSON.stringify({ type: 'order.shipped', data: {} });
    const res = await t.call('POST', `/inbound/${a.source}`, { rawBody: body, headers: standard.headers(a.sourceSecret, 'msg_cross', body) });
    expect(res.status).toBe(200);
    // Rows name the event by the uuid its TypeID encodes.
    const deliveries = await t.platform.db('deliveries').where({ event_id: uuidOf('event', res.body.eventId) });
    expect(deliveries.map((d) => idOfUuid('endpoint', d.endpoint_id))).toEqual([a.endpoint]);
    expect((await b.tenant.call('GET', `/v1/events/${res.body.eventId}`)).status).toBe(404);
  });
});
