import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { expectError, listAll } from '../helpers/api.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

// No event is published in this file, so none of these URLs is ever contacted.
const target = 'http://127.0.0.1:9/hook';

describe('endpoints API', () => {
  let t: TestPlatform;
  let tenant: TestTenant;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('endpoints');
  });
  afterAll(async () => {
    await t?.stop();
  });

  const create = (body: Record<string, unknown>) => tenant.call('POST', '/v1/endpoints', { body });
  // Rows name their tenant by the uuid its TypeID encodes (an audit entry's target keeps its TypeID).
  const auditActions = async (id: string) =>
    (await t.platform.db('audit_log').where({ target_id: id, tenant_id: uuidOf('tenant', tenant.id) }).orderBy('id')).map((r) => r.action as string);

  it('creates an endpoint with a whsec_ secret of 24+ random bytes and documented defaults', async () => {
    const res = await create({ url: target });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^ep_[0-9a-z]{26}$/),
      url: target,
      eventTypes: [],
      status: 'active',
      disabledReason: null,
      ordering: 'none',
      maxConcurrency: t.config.endpointMaxConcurrency,
      rateLimitPerSecond: null,
      description: null,
      retryPolicy: {},
    });
    const secret = res.body.secret as string;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64').length).toBeGreaterThanOrEqual(24);

    const second = await create({ url: target });
    expect(second.body.secret).not.toBe(secret);
  });

  it('keeps every field given at creation', async () => {
    const body = {
      url: 'https://hooks.example.com/in?x=1',
      eventTypes: ['order.*', 'message.status'],
      description: 'billing',
      maxConcurrency: 3,
      rateLimitPerSecond: 7,
      retryPolicy: { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 60000, maxEventAgeSeconds: 3600 },
      ordering: 'per-message',
    };
    const res = await create(body);
    expect(res.status).toBe(201);
    const { secret: _, ...shown } = res.body;
    const got = await tenant.call('GET', `/v1/endpoints/${res.body.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(shown);
    expect(got.body).toMatchObject({ ...body, status: 'active' });
    expect(got.body).not.toHaveProperty('secret');
  });

  it('refuses URLs that are not absolute http(s) URLs', async () => {
    expectError(await create({ url: 'not a url' }), 400, 'invalid_url');
    expectError(await create({ url: '/relative/path' }), 400, 'invalid_url');
    expectError(await create({ url: 'ftp://files.example.com/x' }), 400, 'scheme_not_allowed');
    expectError(await create({ url: 'file:///etc/passwd' }), 400, 'scheme_not_allowed');
    expectError(await create({ url: 'https://user:pw@hooks.example.com/' }), 400, 'credentials_in_url');
    expectError(await create({}), 400, 'validation_failed');
    expectError(await create({ url: target, unknown: 1 }), 400, 'validation_failed');
  });

  it('validates event type filters: exact types and `.*` prefixes only', async () => {
    const ok = await create({ url: target, eventTypes: ['order.*', 'message.status', 'a_b-c.d'] });
    expect(ok.status).toBe(201);
    expect(ok.body.eventTypes).toEqual(['order.*', 'message.status', 'a_b-c.d']);
    for (const bad of ['bad type!', '*', 'order.', '.order', 'order.*.x', '']) {
      expectError(await create({ url: target, eventTypes: [bad] }), 400, 'validation_failed');
    }
  });

  it('validates numbers, ordering and the retry policy', async () => {
    for (const body of [
      { maxConcurrency: 0 },
      { maxConcurrency: 1.5 },
      { rateLimitPerSecond: 0 },
      { ordering: 'fifo' },
      { retryPolicy: { maxAttempts: 0 } },
      { retryPolicy: { unknown: 1 } },
    ]) {
      expectError(await create({ url: target, ...body }), 400, 'validation_failed');
    }
  });

  it('lists endpoints page by page: every endpoint exactly once, newest first, then nextCursor null', async () => {
    const other = await t.createTenant('pager');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await other.call('POST', '/v1/endpoints', { body: { url: `${target}/${i}` } });
      ids.push(res.body.id);
    }
    const { items, pages } = await listAll(other, '/v1/endpoints', 2);
    expect(pages).toBe(3);
    expect(items.map((e) => e.id)).toEqual([...ids].reverse());
    expect(items.every((e) => !('secret' in e))).toBe(true);

    const last = await other.call('GET', '/v1/endpoints?limit=5');
    expect(last.body.data).toHaveLength(5);
    expect(last.body.nextCursor).toBeNull();
    expectError(await other.call('GET', '/v1/endpoints?cursor=garbage'), 400, 'invalid_cursor');
    expectError(await other.call('GET', '/v1/endpoints?limit=0'), 400, 'validation_failed');
  });

  it('PATCH changes fields, disables with a reason and re-enables, each audited', async () => {
    const { body: ep } = await create({ url: target });
    const patched = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, {
      body: { description: 'renamed', eventTypes: ['invoice.*'], maxConcurrency: 2 },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: ep.id, url: target, description: 'renamed', eventTypes: ['invoice.*'], maxConcurrency: 2, status: 'active' });
    expect(patched.body).not.toHaveProperty('secret');

    const disabled = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'disabled' } });
    expect(disabled.status).toBe(200);
    expect(disabled.body.status).toBe('disabled');
    expect(disabled.body.disabledReason).toEqual(expect.any(String));
    expect((await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body).toMatchObject({ status: 'disabled', disabledReason: disabled.body.disabledReason });

    const enabled = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'active' } });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ status: 'active', disabledReason: null, description: 'renamed' });

    const moved = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { url: 'https://hooks.example.com/new' } });
    expect(moved.body.url).toBe('https://hooks.example.com/new');

    expect(await auditActions(ep.id)).toEqual(['endpoint.created', 'endpoint.updated', 'endpoint.disabled', 'endpoint.enabled', 'endpoint.updated']);
    const audit = await t.platform.db('audit_log').where({ target_id: ep.id }).first();
    expect(audit).toMatchObject({ actor_type: 'api_key', target_type: 'endpoint' });
    expect(audit.actor_id).toMatch(/^key_/);
  });

  it('PATCH validates like creation and answers 404 for an unknown id', async () => {
    const { body: ep } = await create({ url: target });
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { url: 'ftp://x.example.com' } }), 400, 'scheme_not_allowed');
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { eventTypes: ['bad type!'] } }), 400, 'validation_failed');
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'sleeping' } }), 400, 'validation_failed');
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: {} }), 400, 'validation_failed');
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { secret: 'whsec_x' } }), 400, 'validation_failed');
    expect((await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body).toMatchObject({ url: target, eventTypes: [], status: 'active' });
    expectError(await tenant.call('PATCH', '/v1/endpoints/ep_01h455vb4pex5vsknk084sn02q', { body: { description: 'x' } }), 404, 'not_found');
  });

  it('DELETE answers 204, then the endpoint is gone from GET, PATCH, rotate and the list', async () => {
    const { body: ep } = await create({ url: target });
    const del = await tenant.call('DELETE', `/v1/endpoints/${ep.id}`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expectError(await tenant.call('GET', `/v1/endpoints/${ep.id}`), 404, 'not_found');
    expectError(await tenant.call('DELETE', `/v1/endpoints/${ep.id}`), 404, 'not_found');
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'active' } }), 404, 'not_found');
    expectError(await tenant.call('POST', `/v1/endpoints/${ep.id}/secret/rotate`), 404, 'not_found');
    const { items } = await listAll(tenant, '/v1/endpoints', 50);
    expect(items.map((e) => e.id)).not.toContain(ep.id);
    expect(await auditActions(ep.id)).toEqual(['endpoint.created', 'endpoint.deleted']);
  });

  it('answers an id that is no endpoint TypeID as an unknown one: 404 on every route, nothing for a filter, 400 for a cursor', async () => {
    // Stored as the uuid a TypeID encodes, each of these would fail to convert: none may become a 500.
    const malformed = ['ep_8zzzzzzzzzzzzzzzzzzzzzzzzz', 'ep_01H455VB4PEX5VSKNK084SN02Q', 'ep_nope', newId('event'), 'x'.repeat(100)];
    for (const id of malformed) {
      const at = `/v1/endpoints/${id}`;
      const answers = {
        get: await tenant.call('GET', at),
        patch: await tenant.call('PATCH', at, { body: { description: 'x' } }),
        pause: await tenant.call('POST', `${at}/pause`, { body: { reason: 'x' } }),
        resume: await tenant.call('POST', `${at}/resume`, { body: {} }),
        secret: await tenant.call('GET', `${at}/secret`),
        rotate: await tenant.call('POST', `${at}/secret/rotate`),
        stats: await tenant.call('GET', `${at}/stats`),
        test: await tenant.call('POST', `${at}/test`, { body: {} }),
        backfill: await tenant.call('POST', `${at}/backfill`, { body: { since: new Date(Date.now() - 3_600_000).toISOString(), reason: 'history', dryRun: true } }),
        delete: await tenant.call('DELETE', at),
      };
      for (const [route, res] of Object.entries(answers)) expect({ id, route, status: res.status, code: res.body?.error?.code }).toEqual({ id, route, status: 404, code: 'not_found' });
      const filtered = await tenant.call('GET', `/v1/deliveries?endpointId=${encodeURIComponent(id)}`);
      expect({ id, status: filtered.status, data: filtered.body.data }).toEqual({ id, status: 200, data: [] });
    }
    // A page cursor carries the last id seen: another kind's is no endpoint's.
    const foreign = Buffer.from(newId('delivery')).toString('base64url');
    expectError(await tenant.call('GET', `/v1/endpoints?cursor=${foreign}`), 400, 'invalid_cursor');
  });

  it('rotating the secret returns a new whsec_ secret; the old one is kept only for the overlap', async () => {
    const { body: ep } = await create({ url: target });
    const rotated = await tenant.call('POST', `/v1/endpoints/${ep.id}/secret/rotate`);
    expect(rotated.status).toBe(200);
    expect(rotated.body).toEqual({ secret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: expect.any(String) });
    expect(rotated.body.secret).not.toBe(ep.secret);
    expect(Buffer.from(rotated.body.secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);

    // Neither secret is ever shown again.
    const got = await tenant.call('GET', `/v1/endpoints/${ep.id}`);
    expect(got.text).not.toContain(ep.secret);
    expect(got.text).not.toContain(rotated.body.secret);

    // Stored: the new one current, the old one as the previous secret expiring in about 24 h.
    const box = new SecretBox(t.config.secretsKey);
    const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first();
    expect(box.open(row.secret_enc, ep.id)).toBe(rotated.body.secret);
    expect(box.open(row.previous_secret_enc, ep.id)).toBe(ep.secret);
    expect(row.previous_secret_expires_at.getTime() - Date.now()).toBeGreaterThan(23.9 * 3600_000);
    expect(row.previous_secret_expires_at.getTime() - Date.now()).toBeLessThanOrEqual(24 * 3600_000);
    // The answer says exactly until when the previous secret keeps signing.
    expect(rotated.body.previousSecretExpiresAt).toBe(row.previous_secret_expires_at.toISOString());

    // A second rotation retires the first secret completely.
    const again = await tenant.call('POST', `/v1/endpoints/${ep.id}/secret/rotate`);
    const row2 = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first();
    expect(box.open(row2.secret_enc, ep.id)).toBe(again.body.secret);
    expect(box.open(row2.previous_secret_enc, ep.id)).toBe(rotated.body.secret);

    expect(await auditActions(ep.id)).toEqual(['endpoint.created', 'endpoint.secret_rotated', 'endpoint.secret_rotated']);
  });

  it('refuses requests without a valid API key', async () => {
    expectError(await t.call('GET', '/v1/endpoints'), 401, 'unauthorized');
    expectError(await t.call('GET', '/v1/endpoints', { token: 'sk_not-a-real-key' }), 401, 'unauthorized');
    expectError(await t.call('POST', '/v1/endpoints', { token: `${tenant.apiKey}x`, body: { url: target } }), 401, 'unauthorized');
  });
});

describe('endpoints API with ALLOW_PRIVATE_TARGETS=false', () => {
  let t: TestPlatform;
  let tenant: TestTenant;

  beforeAll(async () => {
    t = await startTestPlatform({ env: { ALLOW_PRIVATE_TARGETS: 'false' } });
    tenant = await t.createTenant('strict');
  });
  afterAll(async () => {
    await t?.stop();
  });

  const create = (url: string) => tenant.call('POST', '/v1/endpoints', { body: { url } });

  it('requires https', async () => {
    expectError(await create('http://hooks.example.com/in'), 400, 'scheme_not_allowed');
  });

  it('refuses loopback, private, link-local and localhost targets at registration and on PATCH', async () => {
    for (const url of [
      'https://127.0.0.1/hook',
      'https://127.1/hook',
      'https://2130706433/hook',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://10.0.0.5/hook',
      'https://192.168.1.1/hook',
      'https://172.16.0.1/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://0.0.0.0/hook',
      'https://localhost/hook',
      'https://api.localhost/hook',
    ]) {
      const res = await create(url);
      expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 400, code: 'private_address' });
    }
    const ok = await create('https://hooks.example.com/in');
    expect(ok.status).toBe(201);
    expectError(await tenant.call('PATCH', `/v1/endpoints/${ok.body.id}`, { body: { url: 'https://10.1.2.3/x' } }), 400, 'private_address');
    expect((await tenant.call('GET', `/v1/endpoints/${ok.body.id}`)).body.url).toBe('https://hooks.example.com/in');
    expect(await t.platform.db('endpoints').where({ tenant_id: uuidOf('tenant', tenant.id) })).toHaveLength(1);
  });
});
