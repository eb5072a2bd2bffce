import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { expectError, listAll } from '../helpers/api.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

const publicBaseUrl = 'https://relay.example.com/base';

describe('sources API', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let box: SecretBox;

  beforeAll(async () => {
    // The trailing slash must not produce a double slash in ingestUrl.
    t = await startTestPlatform({ env: { PUBLIC_BASE_URL: `${publicBaseUrl}/` } });
    tenant = await t.createTenant('sources');
    box = new SecretBox(t.config.secretsKey);
  });
  afterAll(async () => {
    await t?.stop();
  });

  const create = (body: Record<string, unknown>) => tenant.call('POST', '/v1/sources', { body });
  const storedSecret = async (id: string) => box.open((await t.platform.db('sources').where({ id }).first()).secret_enc, id);

  const generatedFormats = {
    'momo-communication': /^[0-9a-f]{64}$/,
    'momo-automation': /^[0-9a-f]{64}$/,
    'standard-webhooks': /^whsec_[A-Za-z0-9+/]{32,}=*$/,
  } as const;

  for (const [type, format] of Object.entries(generatedFormats)) {
    it(`creates a ${type} source with a generated secret shown once`, async () => {
      const res = await create({ type, name: `my ${type}` });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^src_[0-9a-z]{26}$/),
        type,
        name: `my ${type}`,
        ingestUrl: `${publicBaseUrl}/inbound/${res.body.id}`,
        reconcile: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
        previousSecretExpiresAt: null,
        secret: expect.stringMatching(format),
      });
      // The secret that was shown is the one that verifies callbacks.
      expect(await storedSecret(res.body.id)).toBe(res.body.secret);

      const got = await tenant.call('GET', `/v1/sources/${res.body.id}`);
      expect(got.status).toBe(200);
      const { secret: _, ...withoutSecret } = res.body;
      expect(got.body).toEqual(withoutSecret);
      expect(got.text).not.toContain(res.body.secret);
    });
  }

  it('never echoes a secret the tenant supplied', async () => {
    const secret = 'tenant-chosen-secret-0123456789';
    const res = await create({ type: 'momo-communication', name: 'explicit', secret });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('secret');
    expect(res.text).not.toContain(secret);
    expect((await tenant.call('GET', `/v1/sources/${res.body.id}`)).text).not.toContain(secret);
    expect(await storedSecret(res.body.id)).toBe(secret);
  });

  it('keeps the reconcile block without ever showing its API key', async () => {
    const apiKey = 'momo-api-key-for-reconcile-42';
    const res = await create({
      type: 'momo-communication',
      name: 'reconciled',
      reconcile: { baseUrl: 'https://api.momo.example.com/v1', apiKey, afterSeconds: 120 },
    });
    expect(res.status).toBe(201);
    expect(res.body.reconcile).toEqual({ baseUrl: 'https://api.momo.example.com/v1', afterSeconds: 120 });
    expect(res.text).not.toContain(apiKey);
    const got = await tenant.call('GET', `/v1/sources/${res.body.id}`);
    expect(got.body.reconcile).toEqual({ baseUrl: 'https://api.momo.example.com/v1', afterSeconds: 120 });
    expect(got.text).not.toContain(apiKey);

    const defaulted = await create({ type: 'momo-communication', name: 'r2', reconcile: { baseUrl: 'https://api.momo.example.com', apiKey } });
    expect(defaulted.status).toBe(201);
    expect(defaulted.body.reconcile).toEqual({ baseUrl: 'https://api.momo.example.com', afterSeconds: 300 });
  });

  it('validates type, name, secret and the reconcile block', async () => {
    // Rows name their tenant by the uuid its TypeID encodes.
    const before = await t.platform.db('sources').where({ tenant_id: uuidOf('tenant', tenant.id) }).count({ n: '*' });
    for (const body of [
      { type: 'paypal', name: 'x' },
      { name: 'no type' },
      { type: 'momo-automation' },
      { type: 'momo-automation', name: '' },
      { type: 'momo-automation', name: 'short secret', secret: 'too-short' },
      { type: 'momo-automation', name: 'extra', unknown: true },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'not a url', apiKey: 'k' } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'ftp://api.example.com', apiKey: 'k' } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com' } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com', apiKey: '' } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com', apiKey: 'k', afterSeconds: 1 } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com', apiKey: 'k', afterSeconds: '60' } },
      { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com', apiKey: 'k', extra: 1 } },
    ]) {
      const res = await create(body);
      expect({ body, status: res.status, code: res.body?.error?.code }).toEqual({ body, status: 400, code: 'validation_failed' });
    }
    expect(await t.platform.db('sources').where({ tenant_id: uuidOf('tenant', tenant.id) }).count({ n: '*' })).toEqual(before);
  });

  it('lists sources page by page without secrets, and answers 404 for an unknown id', async () => {
    const other = await t.createTenant('source-pager');
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await other.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: `s${i}` } })).body.id);
    const { items, pages } = await listAll(other, '/v1/sources', 2);
    expect(pages).toBe(3);
    expect(items.map((s) => s.id)).toEqual([...ids].reverse());
    expect(items.every((s) => !('secret' in s))).toBe(true);
    expectError(await other.call('GET', '/v1/sources/src_01h455vb4pex5vsknk084sn02q'), 404, 'not_found');
  });
});

describe('sources API with ALLOW_PRIVATE_TARGETS=false', () => {
  let t: TestPlatform;

  beforeAll(async () => {
    t = await startTestPlatform({ env: { ALLOW_PRIVATE_TARGETS: 'false' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses a reconcile baseUrl the platform must not call (it polls it with the tenant API key)', async () => {
    const tenant = await t.createTenant('strict');
    for (const baseUrl of ['http://api.example.com', 'https://127.0.0.1:8080', 'https://169.254.169.254', 'https://localhost']) {
      const res = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'r', reconcile: { baseUrl, apiKey: 'k' } } });
      expect({ baseUrl, status: res.status }).toEqual({ baseUrl, status: 400 });
      expect(res.body.error.code).toMatch(/^(scheme_not_allowed|private_address)$/);
    }
    const ok = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'r', reconcile: { baseUrl: 'https://api.example.com', apiKey: 'k' } } });
    expect(ok.status).toBe(201);
    // Without PUBLIC_BASE_URL the ingest URL is built from the local address.
    expect(ok.body.ingestUrl).toBe(`${t.config.publicBaseUrl}/inbound/${ok.body.id}`);
  });
});
