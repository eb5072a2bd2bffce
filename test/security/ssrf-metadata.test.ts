// Link-local and cloud metadata addresses stay refused with ALLOW_PRIVATE_TARGETS=true, the setting
// that opens loopback and private ranges for local development. Refused at registration (every
// literal notation, endpoints and reconcile baseUrls) and at connect time (a DNS answer that
// includes such an address). No request ever goes to a metadata address, even if the guard were
// broken: registered endpoints get no events, and every DNS answer below lists 127.0.0.1 first, so
// a connection that slipped past the guard would land on the counting loopback listener instead.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import type { LookupFn } from '../../src/outbound/http-client.js';
import { createEndpoint, publish, settledDelivery } from '../helpers/dispatch.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';
import { startLoopbackListeners, type LoopbackListeners } from './helpers.js';

/** Names a tenant's DNS zone could publish: loopback first, a metadata address beside it. */
const answers: Record<string, string[]> = {
  'loopback.test': ['127.0.0.1'],
  'aws.mixed.test': ['127.0.0.1', '169.254.169.254'],
  'mapped.mixed.test': ['127.0.0.1', '::ffff:169.254.169.254'],
  'nat64.mixed.test': ['127.0.0.1', '64:ff9b::a9fe:a9fe'],
  'aws6.mixed.test': ['127.0.0.1', 'fd00:ec2::254'],
  'alibaba.mixed.test': ['127.0.0.1', '100.100.100.200'],
  'linklocal6.mixed.test': ['127.0.0.1', 'fe80::1'],
};
const lookup: LookupFn = async (hostname) => {
  const found = answers[hostname];
  if (!found) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  return found.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};
const mixedNames = Object.keys(answers).filter((name) => name.endsWith('.mixed.test'));

/** Literal notations of link-local and metadata addresses that a URL parser accepts. */
const literals = [
  '169.254.169.254',
  '2852039166',
  '0xA9FEA9FE',
  '0251.0376.0251.0376',
  '169.254.43518',
  '[::ffff:169.254.169.254]',
  '[64:ff9b::a9fe:a9fe]',
  '[2002:a9fe:a9fe::]',
  '[::a9fe:a9fe]',
  '[fe80::1]',
  '[fd00:ec2::254]',
  '100.100.100.200',
];

describe('SSRF with ALLOW_PRIVATE_TARGETS=true: link-local and metadata stay refused', () => {
  let t: TestPlatform;
  let listeners: LoopbackListeners;

  beforeAll(async () => {
    listeners = await startLoopbackListeners();
    t = await startTestPlatform({ env: { ALLOW_PRIVATE_TARGETS: 'true', RECONCILE_INTERVAL_SECONDS: '3600' }, lookup });
  });
  afterAll(async () => {
    await t?.stop();
    await listeners?.close();
  });

  it('control: loopback over http is accepted and delivered, so the refusals below are not the default', async () => {
    const tenant = await t.createTenant();
    listeners.reset();
    await createEndpoint(tenant, { url: `http://loopback.test:${listeners.port}/hook` });
    const delivery = await settledDelivery(tenant, await publish(tenant), 30_000);
    expect(delivery.status).toBe('succeeded');
    expect(listeners.requests).toBe(1);
  });

  it.each(literals)('POST and PATCH /v1/endpoints refuse %s with 400 private_address, naming the setting', async (host) => {
    // A tenant of its own that never publishes: nothing could be sent even if a URL got through.
    const tenant = await t.createTenant();
    for (const url of [`http://${host}/latest/meta-data/`, `https://${host}:8443/hook`]) {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url } });
      expect({ url, status: res.status, code: res.body?.error?.code }).toEqual({ url, status: 400, code: 'private_address' });
      expect(res.body.error.message).toMatch(/link-local or cloud metadata address .*refused under every setting, ALLOW_PRIVATE_TARGETS included/);
    }
    const ok = await createEndpoint(tenant, { url: `http://127.0.0.1:${listeners.port}/hook` });
    const patched = await tenant.call('PATCH', `/v1/endpoints/${ok.id}`, { body: { url: `http://${host}/` } });
    expect({ status: patched.status, code: patched.body?.error?.code }).toEqual({ status: 400, code: 'private_address' });
    expect(await t.platform.db('endpoints').where({ tenant_id: uuidOf('tenant', tenant.id) }).pluck('url')).toEqual([`http://127.0.0.1:${listeners.port}/hook`]);
  });

  it('POST /v1/sources refuses every such literal as a reconcile baseUrl, and stores nothing', async () => {
    const tenant = await t.createTenant();
    for (const host of literals) {
      const baseUrl = `http://${host}/api`;
      const res = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'r', reconcile: { baseUrl, apiKey: 'provider-key' } } });
      expect({ baseUrl, status: res.status, code: res.body?.error?.code }).toEqual({ baseUrl, status: 400, code: 'private_address' });
      expect(res.body.error.message).toMatch(/^reconcile\.baseUrl: .*link-local or cloud metadata/);
    }
    expect(await t.platform.db('sources').where({ tenant_id: uuidOf('tenant', tenant.id) })).toHaveLength(0);
  });

  it.each(mixedNames)('a DNS answer of %s that includes a metadata address is refused at connect time', async (name) => {
    const tenant = await t.createTenant();
    listeners.reset();
    // A name is judged when connecting, not when registering (its answer can change).
    await createEndpoint(tenant, { url: `http://${name}:${listeners.port}/hook`, retryPolicy: { maxAttempts: 5 } });
    const delivery = await settledDelivery(tenant, await publish(tenant), 30_000);
    expect(delivery).toMatchObject({ status: 'dead', deadReason: 'terminal', attemptCount: 1 });
    expect(delivery.attempts!.map((a) => [a.errorClass, a.outcome])).toEqual([['ssrf_refused', 'terminal']]);
    expect(delivery.lastError).toMatch(/^refused: hostname resolves to a link-local or cloud metadata address \((link_local|metadata)\), refused under every setting$/);
    expect(listeners.connections).toBe(0);
  });

  it('a reconcile baseUrl whose DNS answer includes a metadata address is never polled; a loopback one is', async () => {
    const tenant = await t.createTenant();
    const secret = 'comm-secret-0123456789';
    const sources: Record<string, string> = {};
    for (const name of ['loopback.test', ...mixedNames]) {
      const baseUrl = `http://${name}:${listeners.port}/api`;
      const created = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name, secret, reconcile: { baseUrl, apiKey: 'provider-key', afterSeconds: 10 } } });
      expect(created.status, created.text).toBe(201);
      sources[name] = created.body.id;
      // A message left in a non-final status: exactly what reconciliation polls for.
      const body = communication.messageStatus(`m-${name}`, 'sent');
      expect((await t.call('POST', `/inbound/${created.body.id}`, { rawBody: body, headers: communication.headers(secret, body) })).status).toBe(200);
    }
    await t.platform.db('messages').whereIn('source_id', Object.values(sources)).update({ updated_at: t.platform.db.raw("now() - interval '1 hour'") });
    listeners.reset();
    const counts = await t.platform.reconciler!.runOnce();
    // The loopback source is polled (the listener's answer is not a provider answer: invalid_response);
    // every other one is refused before connecting (provider_error).
    expect(counts).toMatchObject({ provider_error: mixedNames.length, invalid_response: 1, changed: 0 });
    expect(listeners.requests).toBe(1);
    expect(listeners.connections).toBe(1);
  });
});
