import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

    const tenant = await t.platform.db('tenants').where({ id: res.body.id }).first();
    expect(tenant).toMatchObject({ name: 'Acme' });
    const keys = await t.platform.db('api_keys').where({ tenant_id: res.body.id });
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

  it('refuses a tenant API key on the admin route', async () => {
    const tenant = await t.createTenant('holder');
    expectError(await t.call('POST', '/admin/tenants', { token: tenant.apiKey, body: { name: 'escalation' } }), 401, 'unauthorized');
    expect(await t.platform.db('tenants').where({ name: 'escalation' })).toHaveLength(0);
  });

  it('refuses the admin token on tenant routes', async () => {
    expectError(await t.call('GET', '/v1/endpoints', { token: t.config.adminToken }), 401, 'unauthorized');
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
