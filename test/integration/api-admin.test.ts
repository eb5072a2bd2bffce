import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { expectError } from '../helpers/api.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

describe('POST /admin/tenants', () => {
  let t: TestPlatform;

  beforeAll(async () => {
    t = await startTestPlatform();
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('creates a tenant with an API key shown once and stored only as a hash', async () => {
    const res = await t.call('POST', '/admin/tenants', { token: t.config.adminToken, body: { name: 'Acme' } });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^ten_[0-9a-z]{26}$/), name: 'Acme', apiKey: expect.any(String) });

    // Rows hold the tenant as the uuid its TypeID encodes.
    const tenantKey = uuidOf('tenant', res.body.id);
    const tenant = await t.platform.db('tenants').where({ id: tenantKey }).first();
    expect(tenant).toMatchObject({ name: 'Acme' });
    const keys = await t.platform.db('api_keys').where({ tenant_id: tenantKey });
    expect(keys).toHaveLength(1);
    expect(keys[0].key_hash).not.toContain(res.body.apiKey);

    // The key works on tenant routes.
    const list = await t.call('GET', '/v1/endpoints', { token: res.body.apiKey });
    expect(list.status).toBe(200);
    expect(list.body).toEqual({ data: [], nextCursor: null });
  });

  it('gives every tenant its own id and key', async () => {
    const a = await t.call('POST', '/admin/tenants', { token: t.config.adminToken, body: { name: 'same name' } });
    const b = await t.call('POST', '/admin/tenants', { token: t.config.adminToken, body: { name: 'same name' } });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(a.body.id).not.toBe(b.body.id);
    expect(a.body.apiKey).not.toBe(b.body.apiKey);
  });

  it('refuses a missing, wrong or non-bearer admin token with 401', async () => {
    const before = await t.platform.db('tenants').count({ n: '*' });
    expectError(await t.call('POST', '/admin/tenants', { body: { name: 'x' } }), 401, 'unauthorized');
    expectError(await t.call('POST', '/admin/tenants', { token: `${t.config.adminToken}x`, body: { name: 'x' } }), 401, 'unauthorized');
    expectError(await t.call('POST', '/admin/tenants', { token: t.config.adminToken.slice(0, -1), body: { name: 'x' } }), 401, 'unauthorized');
    expectError(
      await t.call('POST', '/admin/tenants', { headers: { authorization: `Basic ${t.config.adminToken}` }, body: { name: 'x' } }),
      401,
      'unauthorized',
    );
    expect(await t.platform.db('tenants').count({ n: '*' })).toEqual(before);
  });

  it('refuses a tenant API key on the admin route, saying the route needs the admin token', async () => {
    const tenant = await t.createTenant('holder');
    const res = await t.call('POST', '/admin/tenants', { token: tenant.apiKey, body: { name: 'escalation' } });
    expectError(res, 401, 'unauthorized');
    expect(res.body.error.message).toBe('this route needs the admin token (ADMIN_TOKEN), not a tenant API key');
    expect(await t.platform.db('tenants').where({ name: 'escalation' })).toHaveLength(0);
  });

  it('refuses the admin token on tenant routes, saying the route needs a tenant API key and not the admin token', async () => {
    for (const [method, path] of [['GET', '/v1/endpoints'], ['POST', '/v1/events'], ['GET', '/v1/sources']] as const) {
      const res = await t.call(method, path, { token: t.config.adminToken, body: method === 'POST' ? { type: 'x', data: {} } : undefined });
      expectError(res, 401, 'unauthorized');
      expect(res.body.error.message).toMatch(/^this route needs a tenant API key \(Authorization: Bearer sk_\.\.\.\), not the admin token; create a tenant with POST \/admin\/tenants/);
    }
    // Without credentials, or with something else, it says what it needs without mentioning the admin token.
    for (const token of [undefined, 'not-a-key']) {
      const res = await t.call('GET', '/v1/endpoints', { token });
      expectError(res, 401, 'unauthorized');
      expect(res.body.error.message).toBe('this route needs a tenant API key: Authorization: Bearer sk_...');
    }
  });

  it('validates the body: empty, blank, missing or unknown fields answer 400 validation_failed', async () => {
    const admin = (body: unknown) => t.call('POST', '/admin/tenants', { token: t.config.adminToken, body });
    for (const body of [{ name: '' }, { name: '   ' }, {}, { name: 42 }, { name: 'ok', extra: true }, { name: 'x'.repeat(201) }]) {
      const res = await admin(body);
      expectError(res, 400, 'validation_failed');
    }
    expectError(
      await t.call('POST', '/admin/tenants', { token: t.config.adminToken, rawBody: '{"name":', headers: { 'content-type': 'application/json' } }),
      400,
      'malformed_json',
    );
  });
});
