import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { expectError } from '../helpers/api.js';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { ok, startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer, completed, settledOn } from '../helpers/replay.js';

/**
 * What the portal's management pages call, from portal sessions: reading an endpoint's signing
 * secret (manage only, audited), bulk replays and their progress within the session's scope, and
 * a test event from a session limited to some event types.
 *
 *   endpoints A and B (every type, one attempt each) answer 500 at first, so
 *   order.created and invoice.paid end up as four dead deliveries: A-order, A-invoice, B-order, B-invoice.
 */
describe('portal sessions managing endpoints and replays', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let other: TestTenant;
  let rx: Receiver;
  let epA: { id: string; secret: string };
  let epB: { id: string; secret: string };
  const dead: Record<'aOrder' | 'aInvoice' | 'bOrder' | 'bInvoice', string> = { aOrder: '', aInvoice: '', bOrder: '', bInvoice: '' };

  type Session = { id: string; call: TestTenant['call'] };
  let onlyA: Session; // manage, endpoint A
  let onlyOrders: Session; // manage, order.*
  let readOnly: Session; // read, everything
  let everything: Session; // manage, everything

  async function session(body: Record<string, unknown>): Promise<Session> {
    const created = await tenant.call('POST', '/v1/portal-sessions', { body });
    expect(created.status, created.text).toBe(201);
    const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: new URL(created.body.url).hash.replace(/^#token=/, '') } });
    expect(ex.status, ex.text).toBe(200);
    return { id: created.body.id, call: (m, p, o) => t.call(m, p, { ...o, token: ex.body.sessionToken }) };
  }
  const statusOf = async (id: string) => (await tenant.call('GET', `/v1/deliveries/${id}`)).body.status as string;

  beforeAll(async () => {
    t = await startTestPlatform({ env: { CIRCUIT_FAILURE_THRESHOLD: '100' } });
    tenant = await t.createTenant('portal-manage');
    other = await t.createTenant('other');
    rx = await startReceiver(answer(500));
    epA = await createEndpoint(tenant, { url: `${rx.url}/a`, retryPolicy: { maxAttempts: 1 } });
    epB = await createEndpoint(tenant, { url: `${rx.url}/b`, retryPolicy: { maxAttempts: 1 } });
    const order = await publish(tenant, 'order.created');
    const invoice = await publish(tenant, 'invoice.paid');
    await settledOn(t, epA.id, 2);
    await settledOn(t, epB.id, 2);
    const rows: Array<{ id: string; event_id: string; endpoint_id: string; status: string }> = await t.platform.db('deliveries').where({ tenant_id: uuidOf('tenant', tenant.id) });
    // Rows name events, endpoints and deliveries by uuid; compared as the API names them.
    const find = (event: string, endpoint: string) =>
      idOfUuid('delivery', rows.find((r) => idOfUuid('event', r.event_id) === event && idOfUuid('endpoint', r.endpoint_id) === endpoint && r.status === 'dead')!.id);
    Object.assign(dead, { aOrder: find(order, epA.id), aInvoice: find(invoice, epA.id), bOrder: find(order, epB.id), bInvoice: find(invoice, epB.id) });
    onlyA = await session({ capabilities: ['read', 'manage'], endpointIds: [epA.id] });
    onlyOrders = await session({ capabilities: ['read', 'manage'], eventTypes: ['order.*'] });
    readOnly = await session({});
    everything = await session({ capabilities: ['read', 'manage'] });
  });
  afterAll(async () => {
    await rx?.close();
    await t?.stop();
  });

  describe('GET /v1/endpoints/{id}/secret', () => {
    it('shows the current secret, and after a rotation when the previous one stops signing', async () => {
      const first = await tenant.call('GET', `/v1/endpoints/${epA.id}/secret`);
      expect(first.status).toBe(200);
      expect(first.body).toEqual({ secret: epA.secret, previousSecretExpiresAt: null });
      expect(first.headers.get('cache-control')).toBe('no-store');

      const rotated = await tenant.call('POST', `/v1/endpoints/${epA.id}/secret/rotate`);
      expect(rotated.status).toBe(200);
      const after = await onlyA.call('GET', `/v1/endpoints/${epA.id}/secret`);
      expect(after.status).toBe(200);
      expect(after.body).toEqual({ secret: rotated.body.secret, previousSecretExpiresAt: rotated.body.previousSecretExpiresAt });
      expect(after.body.secret).not.toBe(epA.secret);
    });

    it('needs manage from a session even though it is a GET, and answers 404 outside the scope or the tenant', async () => {
      const refused = await readOnly.call('GET', `/v1/endpoints/${epA.id}/secret`);
      expectError(refused, 403, 'forbidden');
      expect(refused.body.error.message).toBe('this portal link is read-only: showing this needs a link that can manage');
      expectError(await onlyA.call('GET', `/v1/endpoints/${epB.id}/secret`), 404, 'not_found');
      expectError(await other.call('GET', `/v1/endpoints/${epA.id}/secret`), 404, 'not_found');
      expectError(await tenant.call('GET', '/v1/endpoints/ep_01h455vb4pex5vsknk084sn02q/secret'), 404, 'not_found');
      // The read-only session still reads the endpoint itself.
      expect((await readOnly.call('GET', `/v1/endpoints/${epA.id}`)).status).toBe(200);
    });

    it('is audited with who read it, never the value', async () => {
      const current = (await tenant.call('GET', `/v1/endpoints/${epA.id}/secret`)).body.secret as string;
      const audit = await tenant.call('GET', `/v1/audit-log?targetId=${epA.id}&action=endpoint.secret_revealed`);
      expect(audit.status).toBe(200);
      expect(audit.body.data.map((e: { actor: { type: string; id: string | null } }) => e.actor.type)).toEqual(['api_key', 'portal_session', 'api_key']);
      expect(audit.body.data[1]).toMatchObject({ actor: { type: 'portal_session', id: onlyA.id }, target: { type: 'endpoint', id: epA.id }, details: {} });
      const stored = JSON.stringify(await t.platform.db('audit_log').where({ tenant_id: uuidOf('tenant', tenant.id) }));
      for (const secret of [current, epA.secret, epB.secret]) expect(stored).not.toContain(secret.slice('whsec_'.length));
      // Refused and out-of-scope reads revealed nothing, so they are not in the log.
      const refusedByScope = await t.platform.db('audit_log').where({ target_id: epB.id, action: 'endpoint.secret_revealed' });
      expect(refusedByScope).toEqual([]);
    });

    it('says in the OpenAPI document which capability a session needs', async () => {
      const doc = (await t.call('GET', '/openapi.json')).body;
      expect(doc.paths['/v1/endpoints/{id}/secret'].get).toMatchObject({ 'x-portal-session': 'scoped', 'x-portal-capability': 'manage' });
      expect(doc.paths['/v1/endpoints/{id}'].get['x-portal-capability']).toBe('read');
      expect(doc.paths['/v1/endpoints/{id}'].patch['x-portal-capability']).toBe('manage');
      expect(doc.paths['/v1/api-keys'].get['x-portal-capability']).toBeUndefined();
    });
  });

  describe('pausing and resuming from a session', () => {
    it('needs manage, answers 404 outside the scope, and pauses and resumes the endpoint in scope', async () => {
      for (const action of ['pause', 'resume']) {
        expect((await readOnly.call('POST', `/v1/endpoints/${epA.id}/${action}`)).status).toBe(403);
        expect((await onlyA.call('POST', `/v1/endpoints/${epB.id}/${action}`)).status).toBe(404);
      }
      const paused = await onlyA.call('POST', `/v1/endpoints/${epA.id}/pause`, { body: { reason: 'maintenance' } });
      expect(paused.status, paused.text).toBe(200);
      expect(paused.body.status).toBe('paused');
      const resumed = await onlyA.call('POST', `/v1/endpoints/${epA.id}/resume`);
      expect(resumed.status, resumed.text).toBe(200);
      expect(resumed.body.status).toBe('active');
      expect((await tenant.call('GET', `/v1/endpoints/${epB.id}`)).body.status).toBe('active');
    });
  });

  describe('bulk replays from a session', () => {
    const dryRun = async (s: Session, filter: Record<string, unknown>) => {
      const res = await s.call('POST', '/v1/replays', { body: { filter, reason: 'preview', dryRun: true } });
      expect(res.status, res.text).toBe(200);
      return { count: res.body.count as number, sample: (res.body.sample as Array<{ id: string }>).map((d) => d.id).sort() };
    };

    it('a read-only session may not replay, not even a dry run', async () => {
      for (const dry of [true, false]) {
        const res = await readOnly.call('POST', '/v1/replays', { body: { filter: {}, reason: 'x', dryRun: dry } });
        expectError(res, 403, 'forbidden');
        expect(res.body.error.message).toMatch(/read-only/);
      }
    });

    it('a dry run counts only deliveries within the scope, whatever the filter names', async () => {
      expect(await dryRun(onlyA, {})).toEqual({ count: 2, sample: [dead.aOrder, dead.aInvoice].sort() });
      expect(await dryRun(onlyA, { endpointId: epB.id })).toEqual({ count: 0, sample: [] });
      expect(await dryRun(onlyOrders, {})).toEqual({ count: 2, sample: [dead.aOrder, dead.bOrder].sort() });
      expect(await dryRun(onlyOrders, { eventType: 'invoice.*' })).toEqual({ count: 0, sample: [] });
      expect(await dryRun(onlyOrders, { eventType: 'invoice.paid', endpointId: epB.id })).toEqual({ count: 0, sample: [] });
      expect(await dryRun(everything, {})).toMatchObject({ count: 4 });
    });

    it('a replay takes only deliveries within the scope, and is audited as the session', async () => {
      const widening = await onlyA.call('POST', '/v1/replays', { body: { filter: { endpointId: epB.id }, reason: 'try the other one' } });
      expect(widening.status).toBe(202);
      expect(widening.body).toEqual({ dryRun: false, id: expect.any(String), count: 0 });

      rx.setResponder(ok);
      const started = await onlyA.call('POST', '/v1/replays', { body: { filter: { status: 'dead' }, reason: 'receiver fixed' } });
      expect(started.status, started.text).toBe(202);
      expect(started.body.count).toBe(2);
      const done = await completed(onlyA as TestTenant, started.body.id);
      expect(done).toMatchObject({ total: 2, done: 2, failed: 0, reason: 'receiver fixed' });
      expect(await statusOf(dead.aOrder)).toBe('succeeded');
      expect(await statusOf(dead.aInvoice)).toBe('succeeded');
      expect(await statusOf(dead.bOrder)).toBe('dead');
      expect(await statusOf(dead.bInvoice)).toBe('dead');

      const audit = await tenant.call('GET', `/v1/audit-log?targetId=${started.body.id}`);
      expect(audit.body.data).toEqual([
        expect.objectContaining({ action: 'replay.started', actor: { type: 'portal_session', id: onlyA.id }, reason: 'receiver fixed', details: expect.objectContaining({ count: 2 }) }),
      ]);
    });

    it("progress answers 404 to a narrowed session for another session's or the tenant's replay", async () => {
      const mine = await onlyOrders.call('POST', '/v1/replays', { body: { filter: {}, reason: 'orders again' } });
      expect(mine.body.count).toBe(1); // B-order: A-order succeeded above and the filter defaults to dead
      await completed(onlyOrders as TestTenant, mine.body.id);
      expect(await statusOf(dead.bOrder)).toBe('succeeded');
      const byTenant = await tenant.call('POST', '/v1/replays', { body: { filter: { endpointId: epB.id }, reason: 'the rest' } });
      expect(byTenant.body.count).toBe(1);
      await completed(tenant, byTenant.body.id);

      const sameScope = await session({ capabilities: ['read', 'manage'], eventTypes: ['order.*'] });
      for (const [who, s, replay] of [
        ['A-only session, orders session replay', onlyA, mine.body.id],
        ['A-only session, tenant replay', onlyA, byTenant.body.id],
        ['orders session, tenant replay', onlyOrders, byTenant.body.id],
        ['another orders session, orders session replay', sameScope, mine.body.id],
      ] as const) {
        const res = await s.call('GET', `/v1/replays/${replay}`);
        expect({ who, status: res.status }).toEqual({ who, status: 404 });
        expectError(res, 404, 'not_found');
      }
      // Its own, and anything for a session that sees the whole tenant (read-only included), and the tenant itself.
      expect((await onlyOrders.call('GET', `/v1/replays/${mine.body.id}`)).body).toMatchObject({ status: 'completed', total: 1, done: 1 });
      expect((await readOnly.call('GET', `/v1/replays/${byTenant.body.id}`)).body).toMatchObject({ total: 1, done: 1 });
      expect((await everything.call('GET', `/v1/replays/${mine.body.id}`)).status).toBe(200);
      expect((await tenant.call('GET', `/v1/replays/${mine.body.id}`)).status).toBe(200);
      expectError(await other.call('GET', `/v1/replays/${mine.body.id}`), 404, 'not_found');
    });
  });

  describe('POST /v1/endpoints/{id}/test from a session limited to event types', () => {
    it('refuses the default platform.test, which the session could not see, and says which types it may send', async () => {
      const res = await onlyOrders.call('POST', `/v1/endpoints/${epA.id}/test`, { body: {} });
      expectError(res, 403, 'forbidden');
      expect(res.body.error.message).toBe('this portal link covers only the event types order.*: send the test event as one of them (type)');
      expectError(await onlyOrders.call('POST', `/v1/endpoints/${epA.id}/test`, { body: { type: 'invoice.test' } }), 403, 'forbidden');
      expect(await t.platform.db('events').where({ tenant_id: uuidOf('tenant', tenant.id) }).whereIn('type', ['platform.test', 'invoice.test'])).toEqual([]);
    });

    it('sends a test of a type within the scope, which the session can then follow', async () => {
      const sent = await onlyOrders.call('POST', `/v1/endpoints/${epA.id}/test`, { body: { type: 'order.test' } });
      expect(sent.status, sent.text).toBe(202);
      const delivered = await eventually(async () => {
        const res = await onlyOrders.call('GET', `/v1/deliveries/${sent.body.deliveryId}`);
        return res.body.status === 'succeeded' && res.body;
      }, 'the test delivered');
      expect(delivered).toMatchObject({ eventType: 'order.test', endpointId: epA.id });
    });

    it('an endpoint-scoped session sends platform.test to its endpoint as before', async () => {
      const sent = await onlyA.call('POST', `/v1/endpoints/${epA.id}/test`, { body: {} });
      expect(sent.status, sent.text).toBe(202);
      expect((await onlyA.call('GET', `/v1/deliveries/${sent.body.deliveryId}`)).body).toMatchObject({ eventType: 'platform.test' });
    });
  });

  describe('changing endpoints from a session limited to event types', () => {
    const view = async (id: string) => {
      const { url, status, eventTypes, description } = (await tenant.call('GET', `/v1/endpoints/${id}`)).body;
      return { url, status, eventTypes, description, secret: (await tenant.call('GET', `/v1/endpoints/${id}/secret`)).body };
    };

    it('refuses every change to an endpoint that takes other types too, and a look at its secret, changing nothing', async () => {
      const before = await view(epB.id);
      for (const [method, path, body] of [
        ['PATCH', `/v1/endpoints/${epB.id}`, { url: 'https://elsewhere.example/hook' }],
        ['POST', `/v1/endpoints/${epB.id}/pause`, {}],
        ['GET', `/v1/endpoints/${epB.id}/secret`, undefined],
        ['POST', `/v1/endpoints/${epB.id}/secret/rotate`, undefined],
        ['DELETE', `/v1/endpoints/${epB.id}`, undefined],
      ] as const) {
        const res = await onlyOrders.call(method, path, body === undefined ? {} : { body });
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 403 });
        expectError(res, 403, 'forbidden');
        expect(res.body.error.message).toContain('limited to the event types order.*');
      }
      expect(await view(epB.id)).toEqual(before);
    });

    it('changes an endpoint that takes only its types, and keeps what it takes within them', async () => {
      const orders = await createEndpoint(tenant, { url: `${rx.url}/orders`, eventTypes: ['order.*'] });
      const changed = await onlyOrders.call('PATCH', `/v1/endpoints/${orders.id}`, { body: { description: 'orders only', eventTypes: ['order.created'] } });
      expect(changed.status, changed.text).toBe(200);
      expect(changed.body).toMatchObject({ description: 'orders only', eventTypes: ['order.created'] });

      for (const eventTypes of [[], ['order.created', 'invoice.paid'], ['order.*']]) {
        const res = await onlyOrders.call('PATCH', `/v1/endpoints/${orders.id}`, { body: { eventTypes } });
        expect({ eventTypes, status: res.status }).toEqual({ eventTypes, status: eventTypes[0] === 'order.*' ? 200 : 403 });
        if (res.status === 403) expect(res.body.error.message).toContain('must stay within them');
      }
      expect((await view(orders.id)).eventTypes).toEqual(['order.*']);

      expect((await onlyOrders.call('POST', `/v1/endpoints/${orders.id}/pause`, { body: {} })).body.status).toBe('paused');
      expect((await onlyOrders.call('POST', `/v1/endpoints/${orders.id}/resume`, { body: {} })).body.status).toBe('active');
      expect((await onlyOrders.call('GET', `/v1/endpoints/${orders.id}/secret`)).body).toEqual({ secret: orders.secret, previousSecretExpiresAt: null });
      expect((await onlyOrders.call('DELETE', `/v1/endpoints/${orders.id}`)).status).toBe(204);
    });
  });
});
