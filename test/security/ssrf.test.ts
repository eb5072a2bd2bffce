// SSRF, live, with ALLOW_PRIVATE_TARGETS=false. Every notation of loopback is tried twice: through
// the API (refused at registration), and forced into the endpoints table as a data change or a
// DNS change could (refused at send: dead `terminal`, one `ssrf_refused` attempt, never retried).
// Loopback listeners on the very port in those URLs count every connection: the proof is that a
// refusal reached nobody. Only loopback is ever a target here; other private and link-local ranges
// are covered by the pure classifier in test/unit/address-guard.test.ts, with no traffic at all.
import dns from 'node:dns/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import type { LookupFn } from '../../src/outbound/http-client.js';
import { createEndpoint, publish, settledDelivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';
import { startLoopbackListeners, type LoopbackListeners } from './helpers.js';
import { attemptsListed } from '../helpers/database.js';

/**
 * Outbound DNS for this platform: names under .loopback.test answer with loopback addresses, as a
 * tenant-controlled DNS zone (or a rebinding attack) would; every other name goes to the real
 * resolver, so `localhost`, `localhost.` and `foo.localhost` behave as they do in production.
 */
const lookup: LookupFn = (hostname) => {
  if (hostname === 'rebind.loopback.test') return Promise.resolve([{ address: '127.0.0.1', family: 4 }]);
  if (hostname === 'v6.loopback.test') return Promise.resolve([{ address: '::1', family: 6 }]);
  return dns.lookup(hostname, { all: true });
};

/** Every way to write "this machine" in a URL host, each with what it reaches. */
const notations: Array<[host: string, reaches: string]> = [
  ['127.0.0.1', '127.0.0.1'],
  ['localhost', '127.0.0.1 via DNS'],
  ['[::1]', '::1'],
  ['[::ffff:127.0.0.1]', '127.0.0.1 (IPv4-mapped)'],
  ['2130706433', '127.0.0.1 (one decimal number)'],
  ['0x7f000001', '127.0.0.1 (one hex number)'],
  ['127.1', '127.0.0.1 (short form)'],
  ['0.0.0.0', 'the local host'],
  ['0177.0.0.1', '127.0.0.1 (octal)'],
  ['127.0.0.2', 'any of 127/8'],
  ['[0:0:0:0:0:0:0:1]', '::1 (uncompressed)'],
  ['[::ffff:7f00:1]', '127.0.0.1 (IPv4-mapped, hex)'],
  ['127.000.000.001', '127.0.0.1 (zero-padded)'],
  ['0x7f.1', '127.0.0.1 (hex short form)'],
  ['localhost.', 'localhost (root dot)'],
  ['foo.localhost', 'RFC 6761 localhost subdomain'],
  ['rebind.loopback.test', '127.0.0.1 via a DNS answer'],
  ['v6.loopback.test', '::1 via a DNS answer'],
];

describe('SSRF with ALLOW_PRIVATE_TARGETS=false', () => {
  let t: TestPlatform;
  let listeners: LoopbackListeners;
  const url = (host: string, path = '/hook') => `http://${host}:${listeners.port}${path}`;

  beforeAll(async () => {
    listeners = await startLoopbackListeners();
    // A long reconcile interval: the test runs reconciliation itself, so the timer never races it.
    t = await startTestPlatform({ env: { ALLOW_PRIVATE_TARGETS: 'false', RECONCILE_INTERVAL_SECONDS: '3600' }, lookup });
  });
  afterAll(async () => {
    await t?.stop();
    await listeners?.close();
  });

  it('control: the listeners really answer at every literal notation, so zero below means refused', async () => {
    // Without this, "no request arrived" could just mean nothing listens where the URL points.
    const literal = notations.filter(([host]) => !host.includes('localhost') && !host.endsWith('.test'));
    for (const [host] of literal) {
      if (host.includes(':') && !listeners.addresses.includes('::1')) continue; // no IPv6 loopback here
      listeners.reset();
      const res = await fetch(url(host, '/control'));
      expect({ host, status: res.status, requests: listeners.requests }).toEqual({ host, status: 200, requests: 1 });
    }
    listeners.reset();
  });

  const written = notations.filter(([host]) => !host.endsWith('.test'));
  it.each(written)('%s (%s) is refused at registration: POST and PATCH /v1/endpoints answer 400', async (host) => {
    const tenant = await t.createTenant();
    // https, so the refusal is about the address and not the scheme.
    for (const target of [`https://${host}:${listeners.port}/hook`, `https://${host}/hook`]) {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url: target } });
      expect({ target, status: res.status, code: res.body?.error?.code }).toEqual({ target, status: 400, code: 'private_address' });
    }
    // Plain http is refused too (scheme first), and PATCH cannot point an endpoint there either.
    expect((await tenant.call('POST', '/v1/endpoints', { body: { url: url(host) } })).status).toBe(400);
    const ok = await createEndpoint(tenant, { url: 'https://hooks.example.com/hook' });
    const patched = await tenant.call('PATCH', `/v1/endpoints/${ok.id}`, { body: { url: `https://${host}:${listeners.port}/hook` } });
    expect({ status: patched.status, code: patched.body?.error?.code }).toEqual({ status: 400, code: 'private_address' });
    expect(await t.platform.db('endpoints').where({ tenant_id: uuidOf('tenant', tenant.id) }).pluck('url')).toEqual(['https://hooks.example.com/hook']);
    expect(listeners.connections).toBe(0);
  });

  it('a DNS name is judged at send time, not at registration (its answer can change after it)', async () => {
    // Registration resolving the name would prove nothing about the next answer (DNS rebinding),
    // so names other than localhost are accepted here and every connection checks its address:
    // the send-time cases below for rebind.loopback.test and v6.loopback.test are the guard.
    const tenant = await t.createTenant();
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url: `https://rebind.loopback.test:${listeners.port}/hook` } });
    expect(res.status).toBe(201);
    expect(listeners.connections).toBe(0);
  });

  it.each(notations)('%s (%s) forced into the endpoints table is refused at send: dead, one ssrf_refused attempt, no connection', async (host) => {
    const tenant = await t.createTenant();
    // Registered with a public-looking URL (never contacted), then pointed at loopback behind the
    // API's back, the way a database edit or a later DNS answer could.
    const endpoint = await createEndpoint(tenant, { url: 'https://hooks.example.com/hook', retryPolicy: { maxAttempts: 5 } });
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }).update({ url: url(host) });
    const eventId = await publish(tenant);

    const delivery = await settledDelivery(tenant, eventId, 30_000);
    expect(delivery).toMatchObject({ status: 'dead', deadReason: 'terminal', attemptCount: 1, lastStatusCode: null });
    expect(delivery.attempts!.map((a) => [a.attemptNumber, a.trigger, a.errorClass, a.outcome, a.nextAttemptAt])).toEqual([
      [1, 'initial', 'ssrf_refused', 'terminal', null],
    ]);
    // The tenant learns the class of address, never the address (it may map our network).
    expect(delivery.lastError).toMatch(/^refused: (target is|hostname resolves to) a non-public address \((loopback|unspecified)\)$|^refused: target is a localhost name$/);
    expect(delivery.lastError).not.toContain(String(listeners.port));

    // Never retried: the row is final, exactly one attempt exists, and nothing is scheduled.
    const rows = await attemptsListed(t.platform.db).where({ delivery_id: delivery.id });
    expect(rows).toHaveLength(1);
    const row = await t.platform.db('deliveries').where({ id: uuidOf('delivery', delivery.id) }).first();
    expect(row).toMatchObject({ status: 'dead', dead_reason: 'terminal', next_attempt_at: null });
    expect(listeners.connections).toBe(0);
    expect(listeners.requests).toBe(0);
  });

  it('a replay of a refused delivery is refused again and reaches nobody', async () => {
    const tenant = await t.createTenant();
    const endpoint = await createEndpoint(tenant, { url: 'https://hooks.example.com/hook' });
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', endpoint.id) }).update({ url: url('2130706433') });
    const delivery = await settledDelivery(tenant, await publish(tenant), 30_000);
    expect(delivery.status).toBe('dead');
    const replay = await tenant.call('POST', `/v1/deliveries/${delivery.id}/replay`, { body: { reason: 'try again' } });
    expect(replay.status).toBe(202);
    const after = await eventually(
      async () => {
        const d = (await tenant.call('GET', `/v1/deliveries/${delivery.id}`)).body;
        return d.status === 'dead' && d.attempts.length === 2 && d;
      },
      'replayed attempt recorded',
      30_000,
    );
    expect(after.attempts.map((a: { trigger: string; errorClass: string }) => [a.trigger, a.errorClass])).toEqual([
      ['initial', 'ssrf_refused'],
      ['replay', 'ssrf_refused'],
    ]);
    expect(listeners.connections).toBe(0);
  });

  it('refuses every loopback notation as a reconcile baseUrl at registration', async () => {
    const tenant = await t.createTenant();
    for (const [host] of notations.filter(([h]) => !h.endsWith('.test'))) {
      const baseUrl = `https://${host}:${listeners.port}/api`;
      const res = await tenant.call('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'r', reconcile: { baseUrl, apiKey: 'provider-key' } } });
      expect({ baseUrl, status: res.status, code: res.body?.error?.code }).toEqual({ baseUrl, status: 400, code: 'private_address' });
    }
    expect(await t.platform.db('sources').where({ tenant_id: uuidOf('tenant', tenant.id) })).toHaveLength(0);
  });

  it('a reconcile baseUrl forced to loopback is never polled', async () => {
    const tenant = await t.createTenant();
    const hosts = notations.map(([host]) => host);
    const commSecret = 'comm-secret-0123456789';
    const sources: string[] = [];
    for (const [i, host] of hosts.entries()) {
      const created = await tenant.call('POST', '/v1/sources', {
        body: { type: 'momo-communication', name: `r${i}`, secret: commSecret, reconcile: { baseUrl: 'https://api.momo.example.com/api', apiKey: 'provider-key', afterSeconds: 10 } },
      });
      expect(created.status).toBe(201);
      sources.push(created.body.id);
      // A message left in a non-final status: exactly what reconciliation polls for.
      const body = communication.messageStatus(`m-${i}`, 'sent');
      const cb = await t.call('POST', `/inbound/${created.body.id}`, { rawBody: body, headers: communication.headers(commSecret, body) });
      expect(cb.status).toBe(200);
      await t.platform.db('sources').where({ id: created.body.id }).update({ reconcile_base_url: url(host, '/api') });
    }
    await t.platform.db('messages').whereIn('source_id', sources).update({ updated_at: t.platform.db.raw("now() - interval '1 hour'") });

    const counts = await t.platform.reconciler!.runOnce();
    // Every poll was refused before any connection: a provider error, never a change.
    expect(counts).toMatchObject({ provider_error: hosts.length, changed: 0, unchanged: 0, invalid_response: 0 });
    expect(listeners.connections).toBe(0);
    expect(listeners.requests).toBe(0);
    const statuses = await t.platform.db('messages').whereIn('source_id', sources).pluck('status');
    expect(statuses).toEqual(hosts.map(() => 'sent'));
  });
});
