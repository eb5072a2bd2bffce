import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * Portal links end to end: creation, single-use exchange, expiry, revocation, and the scope a
 * session carries, enforced on every tenant route (the route list comes from /openapi.json).
 */

const unknownId = 'x_01h455vb4pex5vsknk084sn02q';
const sha = (v: string) => createHash('sha256').update(v).digest('hex');

describe('portal sessions', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  let tenant: TestTenant;
  let other: TestTenant;
  let assets: string;
  let logs = '';
  const tokens: string[] = [];
  let ep1: string; // every type
  let ep2: string; // invoice.* only
  let orderEvent: string; // → ep1
  let invoiceEvent: string; // → ep1, ep2
  let orderDelivery: string;
  let invoiceDeliveryEp1: string;
  let invoiceDeliveryEp2: string;

  const linkTokenOf = (url: string) => new URL(url).hash.replace(/^#token=/, '');

  async function session(body: Record<string, unknown> = {}): Promise<{ id: string; token: string; call: TestTenant['call'] }> {
    const created = await tenant.call('POST', '/v1/portal-sessions', { body });
    expect(created.status, created.text).toBe(201);
    const link = linkTokenOf(created.body.url);
    const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: link } });
    expect(ex.status, ex.text).toBe(200);
    tokens.push(link, ex.body.sessionToken);
    return { id: created.body.id, token: ex.body.sessionToken, call: (m, p, o) => t.call(m, p, { ...o, token: ex.body.sessionToken }) };
  }

  beforeAll(async () => {
    assets = await mkdtemp(join(tmpdir(), 'portal-assets-'));
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs += chunk.toString();
        done();
      },
    });
    t = await startTestPlatform({
      portalAssetsDir: assets,
      logs: sink,
      env: { LOG_LEVEL: 'trace', PORTAL_FRAME_ANCESTORS: 'https://app.example.com', PORTAL_BRAND_NAME: 'Acme Hooks', PORTAL_ACCENT_COLOR: '#AA3300' },
    });
    receiver = await startReceiver();
    tenant = await t.createTenant('portal-owner');
    other = await t.createTenant('other');
    ep1 = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/one` } })).body.id;
    ep2 = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/two`, eventTypes: ['invoice.*'] } })).body.id;
    orderEvent = await publish(tenant, { type: 'order.created', data: {} });
    invoiceEvent = await publish(tenant, { type: 'invoice.paid', data: {} });
    const all = await eventually(async () => {
      const res = await tenant.call('GET', '/v1/deliveries?status=succeeded&limit=100');
      return res.body.data.length === 3 ? (res.body.data as Array<{ id: string; eventId: string; endpointId: string }>) : undefined;
    }, 'three deliveries succeeded');
    orderDelivery = all.find((d) => d.eventId === orderEvent)!.id;
    invoiceDeliveryEp1 = all.find((d) => d.eventId === invoiceEvent && d.endpointId === ep1)!.id;
    invoiceDeliveryEp2 = all.find((d) => d.eventId === invoiceEvent && d.endpointId === ep2)!.id;
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
    if (assets) await rm(assets, { recursive: true, force: true });
  });

  it('creates a link (tenant key and admin) whose secret is in the fragment, and exchanges it once', async () => {
    const created = await tenant.call('POST', '/v1/portal-sessions', { body: { capabilities: ['read', 'manage'], endpointIds: [ep2], eventTypes: ['invoice.*'] } });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ id: expect.stringMatching(/^ps_/), url: expect.stringMatching(/\/portal\/#token=psl_/), expiresAt: expect.any(String) });
    expect(new URL(created.body.url).origin).toBe(t.config.publicBaseUrl);
    const expiresIn = Date.parse(created.body.expiresAt) - Date.now();
    expect(expiresIn).toBeGreaterThan(3500_000);
    expect(expiresIn).toBeLessThanOrEqual(3600_000);

    const link = linkTokenOf(created.body.url);
    tokens.push(link);
    const ex = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: link } });
    expect(ex.status).toBe(200);
    tokens.push(ex.body.sessionToken);
    expect(ex.body).toEqual({
      id: created.body.id,
      sessionToken: expect.stringMatching(/^pst_/),
      expiresAt: created.body.expiresAt,
      capabilities: ['read', 'manage'],
      endpointIds: [ep2],
      eventTypes: ['invoice.*'],
      tenant: { id: tenant.id, name: 'portal-owner' },
      brand: { name: 'Acme Hooks', accentColor: '#aa3300' },
    });
    const again = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: link } });
    expectError(again, 401, 'link_used');
    expect(again.body.error.message).toMatch(/already been used/);
    expectError(await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: 'psl_nothing' } }), 401, 'unauthorized');

    const byAdmin = await t.call('POST', `/admin/tenants/${tenant.id}/portal-sessions`, { token: t.config.adminToken, body: { expiresInSeconds: 60 } });
    expect(byAdmin.status).toBe(201);
    tokens.push(linkTokenOf(byAdmin.body.url));
    const adminEx = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: linkTokenOf(byAdmin.body.url) } });
    expect(adminEx.body).toMatchObject({ capabilities: ['read'], endpointIds: [], eventTypes: [], tenant: { id: tenant.id } });
    tokens.push(adminEx.body.sessionToken);
    expectError(await t.call('POST', `/admin/tenants/${unknownId}/portal-sessions`, { token: t.config.adminToken, body: {} }), 404, 'not_found');

    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${created.body.id}`);
    expect(audit.body.data.map((e: { action: string }) => e.action)).toEqual(['portal_session.created']);
  });

  it('refuses invalid requests, listing every problem', async () => {
    const bad = await tenant.call('POST', '/v1/portal-sessions', {
      body: { expiresInSeconds: 10, capabilities: ['manage'], eventTypes: ['bad type'] },
    });
    expectError(bad, 400, 'validation_failed');
    expect(bad.body.error.details.map((d: { path: string }) => d.path).sort()).toEqual(['capabilities', 'eventTypes.0', 'expiresInSeconds']);
    expectError(await tenant.call('POST', '/v1/portal-sessions', { body: { expiresInSeconds: 604_801 } }), 400, 'validation_failed');
    const otherEp = (await other.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/other` } })).body.id;
    const foreign = await tenant.call('POST', '/v1/portal-sessions', { body: { endpointIds: [ep1, otherEp] } });
    expectError(foreign, 400, 'validation_failed');
    expect(foreign.body.error.details).toEqual([{ path: 'endpointIds.1', message: expect.any(String) }]);
    expectError(await t.call('POST', '/v1/portal-sessions/exchange', { body: {} }), 400, 'validation_failed');
  });

  it('expires: an old link answers link_expired, an old session session_expired', async () => {
    const created = await tenant.call('POST', '/v1/portal-sessions', { body: {} });
    await t.platform.db('portal_sessions').where({ id: created.body.id }).update({ expires_at: new Date(Date.now() - 1000) });
    const res = await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: linkTokenOf(created.body.url) } });
    expectError(res, 401, 'link_expired');
    expect(res.body.error.message).toMatch(/expired/);

    const s = await session();
    expect((await s.call('GET', '/v1/endpoints')).status).toBe(200);
    await t.platform.db('portal_sessions').where({ id: s.id }).update({ expires_at: new Date(Date.now() - 1000) });
    expectError(await s.call('GET', '/v1/endpoints'), 401, 'session_expired');
  });

  it('revocation ends the session at once, and the list shows it without any token', async () => {
    const s = await session();
    const unused = await tenant.call('POST', '/v1/portal-sessions', { body: {} });
    expect((await s.call('GET', '/v1/endpoints')).status).toBe(200);
    expect((await tenant.call('DELETE', `/v1/portal-sessions/${s.id}`)).status).toBe(204);
    expect((await tenant.call('DELETE', `/v1/portal-sessions/${unused.body.id}`)).status).toBe(204);
    const after = await s.call('GET', '/v1/endpoints');
    expectError(after, 401, 'session_revoked');
    expect(after.body.error.message).toMatch(/revoked/);
    expectError(await t.call('POST', '/v1/portal-sessions/exchange', { body: { token: linkTokenOf(unused.body.url) } }), 401, 'session_revoked');
    expectError(await tenant.call('DELETE', `/v1/portal-sessions/${unknownId}`), 404, 'not_found');

    const list = await tenant.call('GET', '/v1/portal-sessions?limit=100');
    const row = list.body.data.find((r: { id: string }) => r.id === s.id);
    expect(row).toEqual({
      id: s.id,
      capabilities: ['read'],
      scope: { endpointIds: [], eventTypes: [] },
      createdAt: expect.any(String),
      expiresAt: expect.any(String),
      exchangedAt: expect.any(String),
      revokedAt: expect.any(String),
    });
    const text = JSON.stringify(list.body);
    for (const token of tokens) {
      expect(text).not.toContain(token);
      expect(text).not.toContain(sha(token));
    }
    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${s.id}`);
    expect(audit.body.data.map((e: { action: string }) => e.action).sort()).toEqual(['portal_session.created', 'portal_session.revoked']);
  });

  it('a read-only session gets 403 on every write, saying the link is read-only', async () => {
    const s = await session();
    for (const [method, path, body] of [
      ['PATCH', `/v1/endpoints/${ep1}`, { description: 'x' }],
      ['POST', `/v1/endpoints/${ep1}/test`, {}],
      ['POST', `/v1/deliveries/${orderDelivery}/replay`, { reason: 'x' }],
      ['DELETE', `/v1/endpoints/${ep1}`, undefined],
    ] as const) {
      const res = await s.call(method, path, body === undefined ? {} : { body });
      expectError(res, 403, 'forbidden');
      expect(res.body.error.message).toMatch(/read-only/);
    }
    expect((await tenant.call('GET', `/v1/endpoints/${ep1}`)).body.description ?? null).toBeNull();
  });

  it('an endpoint-scoped session sees only its endpoints, their deliveries and their events', async () => {
    const s = await session({ capabilities: ['read', 'manage'], endpointIds: [ep2] });
    const ids = async (path: string) => ((await s.call('GET', path)).body.data as Array<{ id: string }>).map((r) => r.id).sort();
    expect(await ids('/v1/endpoints')).toEqual([ep2]);
    expect(await ids('/v1/deliveries')).toEqual([invoiceDeliveryEp2]);
    expect(await ids(`/v1/deliveries?endpointId=${ep1}`)).toEqual([]);
    expect(await ids('/v1/events')).toEqual([invoiceEvent]);
    expect((await s.call('GET', `/v1/endpoints/${ep2}`)).status).toBe(200);
    expect((await s.call('GET', `/v1/events/${invoiceEvent}`)).body.deliveries.map((d: { id: string }) => d.id)).toEqual([invoiceDeliveryEp2]);
    for (const [method, path, body] of [
      ['GET', `/v1/endpoints/${ep1}`],
      ['GET', `/v1/endpoints/${ep1}/stats`],
      ['POST', `/v1/endpoints/${ep1}/test`, {}],
      ['PATCH', `/v1/endpoints/${ep1}`, { description: 'x' }],
      ['POST', `/v1/endpoints/${ep1}/secret/rotate`],
      ['GET', `/v1/deliveries/${invoiceDeliveryEp1}`],
      ['POST', `/v1/deliveries/${orderDelivery}/replay`, { reason: 'x' }],
      ['GET', `/v1/events/${orderEvent}`],
    ] as Array<[string, string, unknown?]>) {
      const res = await s.call(method, path, body === undefined ? {} : { body });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
      expectError(res, 404, 'not_found');
    }
    // Creating an endpoint would make one outside the scope.
    expectError(await s.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/new` } }), 403, 'forbidden');
    // What is in scope works for a manage session.
    expect((await s.call('POST', `/v1/deliveries/${invoiceDeliveryEp2}/replay`, { body: { reason: 'portal' } })).status).toBe(202);
    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${invoiceDeliveryEp2}`);
    expect(audit.body.data[0]).toMatchObject({ action: 'delivery.replayed', actor: { type: 'portal_session', id: s.id } });
  });

  it('an event-type-scoped session sees only events and deliveries of those types', async () => {
    const s = await session({ eventTypes: ['order.*'] });
    const ids = async (path: string) => ((await s.call('GET', path)).body.data as Array<{ id: string }>).map((r) => r.id).sort();
    expect(await ids('/v1/events')).toEqual([orderEvent]);
    expect(await ids('/v1/deliveries')).toEqual([orderDelivery]);
    expect(await ids('/v1/events?type=invoice.paid')).toEqual([]);
    expectError(await s.call('GET', `/v1/events/${invoiceEvent}`), 404, 'not_found');
    expectError(await s.call('GET', `/v1/deliveries/${invoiceDeliveryEp1}`), 404, 'not_found');
    expect((await s.call('GET', `/v1/deliveries/${orderDelivery}`)).status).toBe(200);
    const exact = await session({ eventTypes: ['invoice.paid'] });
    expect(((await exact.call('GET', '/v1/events')).body.data as Array<{ id: string }>).map((r) => r.id)).toEqual([invoiceEvent]);
  });

  it('every tenant route in the OpenAPI document is either scoped (and tested above) or refused to sessions', async () => {
    const doc = await t.call('GET', '/openapi.json');
    const scopedTested = new Set([
      'get /v1/endpoints',
      'post /v1/endpoints',
      'get /v1/endpoints/{id}',
      'patch /v1/endpoints/{id}',
      'delete /v1/endpoints/{id}',
      'post /v1/endpoints/{id}/secret/rotate',
      'get /v1/endpoints/{id}/secret', // in api-portal-manage.test.ts
      'post /v1/endpoints/{id}/test',
      'get /v1/endpoints/{id}/stats',
      'post /v1/endpoints/{id}/backfill', // in endpoint-backfill.test.ts
      'post /v1/endpoints/{id}/pause', // in api-portal-manage.test.ts
      'post /v1/endpoints/{id}/resume', // in api-portal-manage.test.ts
      'get /v1/events',
      'get /v1/events/{id}',
      'get /v1/deliveries',
      'get /v1/deliveries/{id}',
      'post /v1/deliveries/{id}/replay',
      'get /v1/messages/{messageId}',
      'post /v1/replays', // in api-portal-manage.test.ts
      'get /v1/replays/{id}', // in api-portal-manage.test.ts
      'get /v1/event-types', // in api-browse.test.ts
      'get /v1/dead-letters/summary', // in api-browse.test.ts
      'get /v1/audit-log', // in api-browse.test.ts
    ]);
    const s = await session({ capabilities: ['read', 'manage'] });
    const refused: string[] = [];
    for (const [path, operations] of Object.entries(doc.body.paths as Record<string, Record<string, { security?: Array<Record<string, unknown>>; 'x-portal-session'?: string }>>)) {
      for (const [method, op] of Object.entries(operations)) {
        const route = `${method} ${path}`;
        if (op.security?.some((x) => 'adminToken' in x)) {
          const res = await s.call(method.toUpperCase(), path.replace(/\{[A-Za-z]+\}/g, tenant.id), method === 'get' ? {} : { body: { name: 'x' } });
          expect({ route, status: res.status }).toEqual({ route, status: 401 });
          continue;
        }
        if (!op.security?.some((x) => 'apiKey' in x)) continue;
        if (op['x-portal-session'] === 'refused') {
          refused.push(route);
          const res = await s.call(method.toUpperCase(), path.replace(/\{[A-Za-z]+\}/g, unknownId), method === 'get' ? {} : { body: {} });
          expect({ route, status: res.status, code: res.body?.error?.code }).toEqual({ route, status: 403, code: 'forbidden' });
        } else {
          expect({ route, tested: scopedTested.has(route) }).toEqual({ route, tested: true });
        }
      }
    }
    expect(refused).toEqual(expect.arrayContaining(['post /v1/api-keys', 'get /v1/api-keys', 'get /v1/sources/{id}', 'patch /v1/sources/{id}', 'post /v1/portal-sessions', 'delete /v1/portal-sessions/{id}', 'post /v1/events']));
    // The message timeline follows the scope too.
    await publish(tenant, { type: 'order.created', messageId: 'portal-m1', data: {} });
    const narrow = await session({ eventTypes: ['invoice.*'] });
    expectError(await narrow.call('GET', '/v1/messages/portal-m1'), 404, 'not_found');
    expect((await s.call('GET', '/v1/messages/portal-m1')).status).toBe(200);
  });

  it('serves /portal/ with its security headers, a 503 page before the build, and long-cached hashed assets', async () => {
    const missing = await fetch(`${t.url}/portal/`);
    expect(missing.status).toBe(503);
    expect(await missing.text()).toContain('npm run build:portal');
    await mkdir(join(assets, 'assets'), { recursive: true });
    await writeFile(join(assets, 'index.html'), '<!doctype html><title>portal</title><script type="module" src="./assets/app-abc123.js"></script>');
    await writeFile(join(assets, 'assets', 'app-abc123.js'), 'console.log(1)');
    for (const path of ['/portal/', '/portal/endpoints/ep_1', '/portal/assets/app-abc123.js']) {
      const res = await fetch(`${t.url}${path}`);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      const csp = res.headers.get('content-security-policy')!;
      expect(csp).toContain("script-src 'self'");
      expect(csp).not.toContain('unsafe-inline');
      expect(csp).toContain('frame-ancestors https://app.example.com');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
      if (path.includes('/assets/')) expect(res.headers.get('cache-control')).toMatch(/max-age=31536000.*immutable/);
      else expect(await res.text()).toContain('<title>portal</title>');
    }
    expect((await fetch(`${t.url}/portal/assets/missing-1.js`)).status).toBe(404);
  });

  it('never logs a link or session token', () => {
    expect(logs.length).toBeGreaterThan(0);
    expect(tokens.length).toBeGreaterThan(5);
    for (const token of tokens) {
      expect(logs).not.toContain(token);
      expect(logs).not.toContain(sha(token));
    }
  });
});
