// Egress through a real forward proxy (Debian's tinyproxy, see test/helpers/tinyproxy.ts): https
// targets through CONNECT, http targets in absolute-form, and the proxy's own failures, which must
// charge no endpoint: no attempt used up, no circuit moved, every delivery still arriving once.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { renderMetrics, resetMetrics } from '../../src/metrics/registry.js';
import { createDeliveryClient, type DeliveryClient } from '../../src/outbound/http-client.js';
import { closedPort, createEndpoint, metricValue, publishMany, rawServer } from '../helpers/dispatch.js';
import { attemptsListed, createTestDatabase } from '../helpers/database.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { startTinyproxy, type Tinyproxy } from '../helpers/tinyproxy.js';

const failures = 'webhook_egress_proxy_failures_total';
const proxyFailures = async (reason: string) => metricValue((await renderMetrics()).body, failures, { reason });

const cleanups: Array<() => Promise<unknown>> = [];
afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!();
});
async function proxy(opts: Parameters<typeof startTinyproxy>[0] = {}): Promise<Tinyproxy> {
  const p = await startTinyproxy(opts);
  cleanups.push(() => p.close());
  return p;
}
async function receiver(): Promise<Receiver> {
  const r = await startReceiver();
  cleanups.push(() => r.close());
  return r;
}

/** A self-signed certificate for 127.0.0.1 from the openssl CLI (node:crypto cannot make X.509). */
function selfSignedCert(): { key: string; cert: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'egress-cert-'));
  try {
    const out = spawnSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1',
      '-keyout', path.join(dir, 'key.pem'), '-out', path.join(dir, 'cert.pem'),
    ], { encoding: 'utf8' });
    if (out.status !== 0) throw new Error(`openssl failed: ${out.stderr}`);
    return { key: readFileSync(path.join(dir, 'key.pem'), 'utf8'), cert: readFileSync(path.join(dir, 'cert.pem'), 'utf8') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('the delivery client through the proxy (CONNECT for an https target)', () => {
  const tls = selfSignedCert();
  const received: IncomingHttpHeaders[] = [];
  let httpsPort: number;
  const clients: DeliveryClient[] = [];
  const client = (proxyUrl: string, allowPrivateTargets = true) => {
    const c = createDeliveryClient({
      allowPrivateTargets,
      connectTimeoutMs: 1_000,
      attemptTimeoutMs: 3_000,
      maxResponseBytes: 4096,
      excerptBytes: 256,
      proxy: { url: proxyUrl, noProxy: [] },
      testTrustedCa: tls.cert,
    });
    clients.push(c);
    return c;
  };
  const post = (c: DeliveryClient, port = httpsPort) => c.send({ url: `https://127.0.0.1:${port}/hook`, headers: { 'content-type': 'application/json' }, body: '{}' });

  beforeAll(async () => {
    const server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
      received.push(req.headers);
      req.resume().on('end', () => res.writeHead(200).end('ok'));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    httpsPort = (server.address() as AddressInfo).port;
    cleanups.push(() => new Promise((resolve) => (server.closeAllConnections(), server.close(resolve))));
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
  });

  it('tunnels to the target and gets its answer; the proxy saw only a CONNECT', async () => {
    const p = await proxy({ connectPorts: [httpsPort] });
    const result = await post(client(p.url));
    expect(result.outcome).toEqual({ kind: 'response', statusCode: 200 });
    expect(received.length).toBeGreaterThanOrEqual(1);
    expect(p.log()).toContain(`CONNECT 127.0.0.1:${httpsPort}`);
  });

  it('a proxy that requires credentials answers CONNECT with 407: a proxy failure; with them it goes through', async () => {
    const p = await proxy({ connectPorts: [httpsPort], basicAuth: { user: 'relay', password: 's3cret' } });
    const before = await proxyFailures('auth_required');
    const refused = await post(client(p.url));
    expect(refused.outcome).toMatchObject({ kind: 'proxy_failure', reason: 'auth_required' });
    expect(await proxyFailures('auth_required')).toBe(before + 1);

    const withAuth = await post(client(p.url.replace('http://', 'http://relay:s3cret@')));
    expect(withAuth.outcome).toEqual({ kind: 'response', statusCode: 200 });
  });

  it.each([
    [502, 'bad_gateway'],
    [503, 'unavailable'],
    [504, 'gateway_timeout'],
  ])("the proxy's own %i on CONNECT is a proxy failure (%s)", async (code, reason) => {
    // A proxy of a few bytes: tinyproxy itself answers 500, not 502-504, when it cannot go on.
    const fake = await rawServer((s) => s.end(`HTTP/1.1 ${code} Proxy Trouble\r\ncontent-length: 0\r\n\r\n`));
    cleanups.push(() => fake.close());
    const before = await proxyFailures(reason);
    const result = await post(client(fake.url));
    expect(result.outcome).toMatchObject({ kind: 'proxy_failure', reason });
    expect(await proxyFailures(reason)).toBe(before + 1);
  });

  it('nothing listening at the proxy address is a proxy failure (refused)', async () => {
    const before = await proxyFailures('refused');
    const result = await post(client(`http://127.0.0.1:${await closedPort()}`));
    expect(result.outcome).toMatchObject({ kind: 'proxy_failure', reason: 'refused' });
    expect(await proxyFailures('refused')).toBe(before + 1);
  });

  it("the proxy refusing the target (tinyproxy's 403 for a port it does not CONNECT to) is the endpoint's failure", async () => {
    const p = await proxy({ connectPorts: [httpsPort] });
    const result = await post(client(p.url), await closedPort());
    expect(result.outcome).toEqual({ kind: 'error', errorClass: 'proxy_rejected', message: 'egress proxy answered CONNECT with HTTP 403' });
  });

  it('the SSRF guard judges the target before the proxy is asked', async () => {
    const p = await proxy({ connectPorts: [httpsPort] });
    const result = await post(client(p.url, false));
    expect(result.outcome).toMatchObject({ kind: 'error', errorClass: 'ssrf_refused' });
    expect(p.log()).not.toContain('CONNECT 127.0.0.1');
  });
});

/** deliveries of an endpoint as the database has them. */
async function deliveryRows(t: TestPlatform, endpointId: string) {
  return t.platform.db('deliveries').where('endpoint_id', uuidOf('endpoint', endpointId)).select('id', 'event_id', 'status', 'attempt_count', 'attempt_base', 'last_error');
}

/** Nothing about the endpoint changed: active, circuit closed, no failure counted. */
async function expectEndpointUntouched(t: TestPlatform, endpointId: string) {
  const ep = await t.platform.db('endpoints').where('id', uuidOf('endpoint', endpointId)).first('status', 'consecutive_failures', 'circuit_open_until', 'failing_since');
  expect(ep).toEqual({ status: 'active', consecutive_failures: 0, circuit_open_until: null, failing_since: null });
}

/** Every event arrived exactly once, as attempt 1, through the proxy; one success attempt each. */
async function expectEachOnceFirstTime(t: TestPlatform, r: Receiver, endpointId: string, eventIds: string[]) {
  const ids = r.requests.map((q) => String(q.headers['webhook-id']));
  expect(ids.slice().sort()).toEqual(eventIds.slice().sort());
  for (const q of r.requests) expect(q.headers['webhook-attempt']).toBe('1');
  const rows = await deliveryRows(t, endpointId);
  expect(rows).toHaveLength(eventIds.length);
  for (const d of rows) expect({ status: d.status, attempts: d.attempt_count - d.attempt_base }).toEqual({ status: 'succeeded', attempts: 1 });
  const attempts = await attemptsListed(t.platform.db).whereIn('delivery_id', rows.map((d) => idOfUuid('delivery', d.id))).select('attempt_number', 'outcome');
  expect(attempts).toHaveLength(eventIds.length);
  for (const a of attempts) expect(a).toEqual({ attempt_number: 1, outcome: 'success' });
}

describe('a platform behind the proxy (absolute-form for http targets)', () => {
  it('the proxy killed mid-run and started again: every delivery arrives once, no endpoint is charged', async () => {
    // The counters are per process, and test:fast runs other files in this one: start them at zero.
    resetMetrics();
    const p = await proxy();
    const r = await receiver();
    const t = await startTestPlatform({ env: { EGRESS_PROXY_URL: p.url } });
    cleanups.push(() => t.stop());
    const tenant = await t.createTenant();
    const ep = await createEndpoint(tenant, { url: `${r.url}/hook` });

    const first = await publishMany(tenant, 10);
    // Recorded, not only received: a proxy killed between the receiver's answer and our reading it
    // leaves an attempt whose outcome nobody knows, which is the endpoint's retry (at least once).
    await eventually(async () => (await deliveryRows(t, ep.id)).filter((d) => d.status === 'succeeded').length === 10, 'the first events delivered through the proxy');
    expect(r.requests.every((q) => /tinyproxy/.test(String(q.headers.via)))).toBe(true);
    expect(p.log()).toMatch(new RegExp(`POST http://127\\.0\\.0\\.1:${new URL(r.url).port}/hook`));

    await p.kill();
    const refusedBefore = await proxyFailures('refused');
    const second = await publishMany(tenant, 10);
    // Each waiting delivery fails at the proxy and goes back to pending with its attempt given back.
    await eventually(async () => (await proxyFailures('refused')) >= refusedBefore + 10, 'proxy failures counted');
    // The rows hold each event as the uuid its TypeID encodes.
    const waiting = (await deliveryRows(t, ep.id)).filter((d) => second.includes(idOfUuid('event', d.event_id)));
    expect(waiting.every((d) => d.status !== 'succeeded' && d.attempt_count - d.attempt_base <= 1)).toBe(true);
    expect(waiting.some((d) => String(d.last_error).startsWith('egress_proxy_refused'))).toBe(true);
    await expectEndpointUntouched(t, ep.id);

    await p.start();
    await eventually(async () => r.eventIds().size === 20, 'every event delivered once the proxy is back', 30_000);
    await eventually(async () => (await deliveryRows(t, ep.id)).every((d) => d.status === 'succeeded'), 'every delivery recorded');
    await expectEachOnceFirstTime(t, r, ep.id, [...first, ...second]);
    await expectEndpointUntouched(t, ep.id);
    await expectNoViolations({ db: t.platform.db, receivers: [r], metricsText: [await metricsOf(t.url)], tenantIds: [tenant.id] });
  });

  it('407 without credentials charges nothing; with the right credentials the same deliveries go through', async () => {
    const p = await proxy({ basicAuth: { user: 'relay', password: 'pa-ss_w0rd' } });
    const r = await receiver();
    const database = await createTestDatabase();
    cleanups.push(() => database.drop());
    const without = await startTestPlatform({ database, env: { EGRESS_PROXY_URL: p.url } });
    let tenant: TestTenant | undefined;
    let eventIds: string[] = [];
    let endpointId = '';
    try {
      tenant = await without.createTenant();
      endpointId = (await createEndpoint(tenant, { url: `${r.url}/hook` })).id;
      const before = await proxyFailures('auth_required');
      eventIds = await publishMany(tenant, 3);
      await eventually(async () => (await proxyFailures('auth_required')) >= before + 3, '407s counted as proxy failures');
      await expectEndpointUntouched(without, endpointId);
      const rows = await deliveryRows(without, endpointId);
      expect(rows.every((d) => d.status !== 'succeeded' && d.attempt_count - d.attempt_base <= 1)).toBe(true);
    } finally {
      await without.stop();
    }
    expect(r.requests).toHaveLength(0); // the proxy answered every one of them itself

    const credentials = `relay:${encodeURIComponent('pa-ss_w0rd')}@`;
    let logs = '';
    const sink = new Writable({ write: (chunk: Buffer, _enc, done) => ((logs += chunk.toString()), done()) });
    const withAuth = await startTestPlatform({
      database,
      logs: sink,
      env: { EGRESS_PROXY_URL: p.url.replace('http://', `http://${credentials}`), SECRETS_KEY: without.env.SECRETS_KEY!, LOG_LEVEL: 'trace' },
    });
    cleanups.push(() => withAuth.stop());
    await eventually(async () => r.eventIds().size === 3, 'the deliveries went through with credentials');
    await eventually(async () => (await deliveryRows(withAuth, endpointId)).every((d) => d.status === 'succeeded'), 'every delivery recorded');
    await expectEachOnceFirstTime(withAuth, r, endpointId, eventIds);
    await expectEndpointUntouched(withAuth, endpointId);
    // The proxy's password reaches neither the logs nor the receiver, in clear or as the Basic token.
    expect(logs).not.toBe('');
    const token = Buffer.from('relay:pa-ss_w0rd').toString('base64');
    for (const secret of ['pa-ss_w0rd', token]) {
      expect(logs).not.toContain(secret);
      expect(JSON.stringify(r.requests)).not.toContain(secret);
    }
  });

  it('EGRESS_NO_PROXY targets connect directly; the rest go through the proxy', async () => {
    const p = await proxy();
    const r = await receiver();
    const port = new URL(r.url).port;
    const t = await startTestPlatform({ env: { EGRESS_PROXY_URL: p.url, EGRESS_NO_PROXY: 'example.internal, localhost' } });
    cleanups.push(() => t.stop());
    const tenant = await t.createTenant();
    await createEndpoint(tenant, { url: `http://localhost:${port}/direct` });
    await createEndpoint(tenant, { url: `http://127.0.0.1:${port}/proxied` });
    await publishMany(tenant, 1);
    await eventually(async () => r.requests.length === 2, 'both endpoints received the event');
    const byPath = Object.fromEntries(r.requests.map((q) => [q.path, q.headers.via]));
    expect(byPath['/direct']).toBeUndefined();
    expect(String(byPath['/proxied'])).toMatch(/tinyproxy/);
    expect(p.log()).not.toContain('/direct');
  });
});
