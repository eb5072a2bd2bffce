// The admin API answers only to ADMIN_TOKEN. Tenant isolation between tenants (another tenant's
// ids → 404, lists empty, admin token refused on tenant routes) is proven route by route in
// test/integration/tenant-isolation.test.ts; this file adds the other direction: a tenant's key,
// or anything that is not exactly the admin token, on every admin route.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/** A would-be creation body for routes that take one; GET and DELETE carry none. */
const bodyFor = (method: string, name: string) => (method === 'GET' || method === 'DELETE' ? {} : { body: { name } });

describe('admin API authentication', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let adminRoutes: Array<[method: string, path: string]>;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('holder-of-a-valid-key');
    // The routes come from the app's own OpenAPI document, so a new admin route is covered here
    // the moment it exists.
    const doc = await t.call('GET', '/openapi.json');
    expect(doc.status).toBe(200);
    adminRoutes = [];
    for (const [path, operations] of Object.entries(doc.body.paths as Record<string, Record<string, { security?: Array<Record<string, unknown>> }>>)) {
      for (const [method, op] of Object.entries(operations)) {
        if (op.security?.some((s) => 'adminToken' in s)) adminRoutes.push([method.toUpperCase(), path.replace(/\{[A-Za-z]+\}/g, 'x_01h455vb4pex5vsknk084sn02q')]);
      }
    }
  });
  afterAll(async () => {
    await t?.stop();
  });

  const tenantCount = async () => Number((await t.platform.db('tenants').count({ n: '*' }))[0]!.n);

  it('finds the admin routes in the OpenAPI document', () => {
    expect(adminRoutes).toContainEqual(['POST', '/admin/tenants']);
  });

  it("refuses a tenant's valid API key on every admin route with 401 or 403, and creates nothing", async () => {
    // The key works where it belongs, so the refusal below is about the route, not a dead key.
    expect((await tenant.call('GET', '/v1/endpoints')).status).toBe(200);
    const before = await tenantCount();
    for (const [method, path] of adminRoutes) {
      const res = await tenant.call(method, path, bodyFor(method, 'made-by-a-tenant'));
      expect({ method, path, status: [401, 403].includes(res.status) }).toEqual({ method, path, status: true });
      expect(res.body.error.code).toMatch(/^(unauthorized|forbidden)$/);
      expect(res.text).not.toContain(t.config.adminToken);
    }
    expect(await tenantCount()).toBe(before);
  });

  it('refuses everything that is not exactly the admin token', async () => {
    const admin = t.config.adminToken;
    const before = await tenantCount();
    const attempts: Array<Record<string, string>> = [
      {},
      { authorization: '' },
      { authorization: 'Bearer' },
      { authorization: 'Bearer ' },
      { authorization: `Basic ${Buffer.from(`admin:${admin}`).toString('base64')}` },
      { authorization: `Bearer ${admin.slice(0, -1)}` }, // a prefix
      { authorization: `Bearer ${admin}x` }, // an extension
      { authorization: `Bearer ${admin.toUpperCase()}` },
      { authorization: `Bearer ${admin} ${admin}` },
      { authorization: `Token ${admin}` },
      { authorization: admin }, // no scheme
      { 'x-admin-token': admin },
      { cookie: `token=${admin}` },
    ];
    for (const [method, path] of adminRoutes) {
      for (const headers of attempts) {
        const res = await t.call(method, path, { headers, ...bodyFor(method, 'forged') });
        expect({ headers, status: res.status }).toEqual({ headers, status: 401 });
      }
      // The token in the query string is not a credential either.
      const query = await t.call(method, `${path}?token=${encodeURIComponent(admin)}&access_token=${encodeURIComponent(admin)}`, bodyFor(method, 'forged'));
      expect(query.status).toBe(401);
    }
    expect(await tenantCount()).toBe(before);
    // And the real token does work, so none of the 401s above is vacuous.
    expect((await t.call('POST', '/admin/tenants', { token: admin, body: { name: 'real' } })).status).toBe(201);
  });
});
