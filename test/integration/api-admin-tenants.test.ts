import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, listAll } from '../helpers/api.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

describe('admin: tenants and their API keys', () => {
  let t: TestPlatform;
  let admin: TestTenant;

  beforeAll(async () => {
    t = await startTestPlatform({ role: 'api' });
    // listAll pages through any caller; the admin is one with the admin token.
    admin = { id: '', apiKey: t.config.adminToken, call: (method, path, o) => t.call(method, path, { ...o, token: t.config.adminToken }) };
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('lists tenants newest first, page by page, each exactly once', async () => {
    const created: string[] = [];
    for (const name of ['one', 'two', 'three', 'four', 'five']) created.push((await t.createTenant(name)).id);
    const { items, pages } = await listAll(admin, '/admin/tenants', 2);
    expect(items.map((x) => x.id)).toEqual([...created].reverse());
    expect(pages).toBe(3);
    expect(items[0]).toEqual({ id: created[4], name: 'five', createdAt: expect.any(String) });
    expectError(await admin.call('GET', '/admin/tenants?cursor=nope'), 400, 'invalid_cursor');
    expectError(await admin.call('GET', '/admin/tenants?limit=0'), 400, 'validation_failed');
    expectError(await admin.call('GET', '/admin/tenants?name=one'), 400, 'validation_failed');
  });

  it('shows one tenant with its live keys (never the keys), and 404 for an unknown one', async () => {
    const tenant = await t.createTenant('detailed');
    const res = await admin.call('GET', `/admin/tenants/${tenant.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      id: tenant.id,
      name: 'detailed',
      createdAt: expect.any(String),
      apiKeys: [{ id: expect.stringMatching(/^key_/), name: 'default', prefix: tenant.apiKey.slice(0, 11), createdAt: expect.any(String), lastUsedAt: null }],
    });
    expect(res.text).not.toContain(tenant.apiKey);
    expectError(await admin.call('GET', '/admin/tenants/ten_01jzzzzzzzzzzzzzzzzzzzzzzz'), 404, 'not_found');
  });

  it('answers an id that is no tenant TypeID as an unknown tenant: 404 on every route, 400 for a cursor', async () => {
    // Stored as the uuid a tenant's TypeID encodes: another kind's id, or a malformed one, names no tenant.
    const endpointLike = 'ep_01jzzzzzzzzzzzzzzzzzzzzzzz';
    for (const id of ['ten_nope', 'ten_81jzzzzzzzzzzzzzzzzzzzzzzz', endpointLike, 'ten_01jzzzzzzzzzzzzzzzzzzzzzzzz']) {
      expectError(await admin.call('GET', `/admin/tenants/${id}`), 404, 'not_found');
      expectError(await admin.call('POST', `/admin/tenants/${id}/api-keys`, { body: { name: 'x' } }), 404, 'not_found');
      expectError(await admin.call('POST', `/admin/tenants/${id}/portal-sessions`, { body: {} }), 404, 'not_found');
    }
    const foreignCursor = Buffer.from(endpointLike).toString('base64url');
    expectError(await admin.call('GET', `/admin/tenants?cursor=${foreignCursor}`), 400, 'invalid_cursor');
  });

  it('creates an API key for a tenant, shown once, that works on the tenant routes', async () => {
    const tenant = await t.createTenant('locked out');
    const res = await admin.call('POST', `/admin/tenants/${tenant.id}/api-keys`, { body: { name: 'recovery' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^key_/), name: 'recovery', key: expect.stringMatching(/^sk_/), createdAt: expect.any(String) });
    const own = await t.call('GET', '/v1/api-keys', { token: res.body.key });
    expect(own.status).toBe(200);
    expect(own.body.data.map((k: { name: string }) => k.name)).toEqual(['recovery', 'default']);
    expect(own.text).not.toContain(res.body.key);

    expectError(await admin.call('POST', '/admin/tenants/ten_01jzzzzzzzzzzzzzzzzzzzzzzz/api-keys', { body: { name: 'x' } }), 404, 'not_found');
    for (const body of [{}, { name: '' }, { name: 'x', tenantId: tenant.id }]) {
      expectError(await admin.call('POST', `/admin/tenants/${tenant.id}/api-keys`, { body }), 400, 'validation_failed');
    }
    expectError(
      await admin.call('POST', `/admin/tenants/${tenant.id}/api-keys`, { rawBody: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
      415,
      'unsupported_media_type',
    );
  });

  it('refuses tenant keys and missing credentials on every admin route', async () => {
    const tenant = await t.createTenant('not an admin');
    for (const [method, path] of [['GET', '/admin/tenants'], ['GET', `/admin/tenants/${tenant.id}`], ['POST', `/admin/tenants/${tenant.id}/api-keys`]] as const) {
      const body = method === 'POST' ? { name: 'escalation' } : undefined;
      expectError(await tenant.call(method, path, { body }), 401, 'unauthorized');
      expectError(await t.call(method, path, { body }), 401, 'unauthorized');
    }
    expect((await admin.call('GET', `/admin/tenants/${tenant.id}`)).body.apiKeys).toHaveLength(1);
  });
});
