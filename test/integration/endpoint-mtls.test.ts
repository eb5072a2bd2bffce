import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { expectError } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * Mutual TLS against a real HTTPS receiver that requires a client certificate signed by its own
 * CA, with every certificate made here by the openssl CLI: the right certificate and CA bundle
 * deliver; none, or one from another CA, fail the attempt with a clear error and a retry.
 */

interface Pem {
  cert: string;
  key: string;
}

let dir: string;
let ca: Pem;
let server: Pem;
let client: Pem;
let strangerClient: Pem;
let receiver: Server;
let url: string;
const received: { path: string; subject: string | undefined }[] = [];
let t: TestPlatform;
let tenant: TestTenant;

function openssl(...args: string[]): void {
  execFileSync('/usr/bin/openssl', args, { cwd: dir, stdio: 'pipe' });
}
const read = (name: string) => readFileSync(path.join(dir, name), 'utf8');

function makeCa(name: string): Pem {
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.crt`, '-days', '2', '-subj', `/CN=${name}`);
  return { cert: read(`${name}.crt`), key: read(`${name}.key`) };
}
function makeSigned(name: string, caName: string, ext?: string): Pem {
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  const extArgs = ext ? (writeFileSync(path.join(dir, `${name}.ext`), ext), ['-extfile', `${name}.ext`]) : [];
  openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.crt`, '-CAkey', `${caName}.key`, '-CAcreateserial', '-out', `${name}.crt`, '-days', '2', ...extArgs);
  return { cert: read(`${name}.crt`), key: read(`${name}.key`) };
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'mtls-'));
  ca = makeCa('test-ca');
  makeCa('other-ca');
  server = makeSigned('receiver', 'test-ca', 'subjectAltName=IP:127.0.0.1\n');
  client = makeSigned('tenant-client', 'test-ca');
  strangerClient = makeSigned('stranger-client', 'other-ca');
  receiver = createServer({ cert: server.cert, key: server.key, ca: ca.cert, requestCert: true, rejectUnauthorized: true }, (req, res) => {
    received.push({ path: req.url ?? '', subject: String((req.socket as TLSSocket).getPeerCertificate().subject?.CN) });
    req.resume();
    req.on('end', () => res.writeHead(200).end('ok'));
  });
  receiver.on('tlsClientError', () => {});
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  // A TLS handshake with a client certificate can take longer than the test default of 1 s to
  // connect when the CI machine is loaded; the first attempt's outcome is what these tests read.
  t = await startTestPlatform({ env: { CONNECT_TIMEOUT_MS: '5000', ATTEMPT_TIMEOUT_MS: '10000' } });
  tenant = await t.createTenant('mtls');
});
afterAll(async () => {
  await t?.stop();
  receiver?.closeAllConnections();
  await new Promise((resolve) => receiver?.close(resolve));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function createEndpoint(pathName: string, eventType: string, tls: unknown): Promise<string> {
  const res = await tenant.call('POST', '/v1/endpoints', { body: { url: `${url}${pathName}`, eventTypes: [eventType], ...(tls !== undefined && { tls }) } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}
async function publish(type: string): Promise<string> {
  const res = await tenant.call('POST', '/v1/events', { body: { type, data: {} } });
  expect(res.status, res.text).toBe(202);
  return res.body.id as string;
}
/** The event's one delivery, once its first attempt is recorded. */
async function firstAttempt(eventId: string) {
  return eventually(async () => {
    const ev = await tenant.call('GET', `/v1/events/${eventId}`);
    const id = (ev.body.deliveries as { id: string }[])[0]?.id;
    if (!id) return false;
    const d = await tenant.call('GET', `/v1/deliveries/${id}`);
    return (d.body.attempts as unknown[]).length > 0 && d.body;
  }, 'the first attempt was recorded');
}

describe('mutual TLS', () => {
  it('delivers with the right client certificate and the private CA, and never shows the key', async () => {
    const id = await createEndpoint('/right', 'mtls.right', { clientCertificate: client.cert, clientKey: client.key, caCertificates: ca.cert });
    const got = await tenant.call('GET', `/v1/endpoints/${id}`);
    expect(got.body.tls).toMatchObject({ clientCertificate: { subject: 'CN=tenant-client', issuer: 'CN=test-ca' }, caCertificates: 1 });
    expect(got.body.tls.clientCertificate.fingerprint256).toMatch(/^[0-9A-F:]+$/);
    expect(got.text).not.toContain('PRIVATE KEY');
    expect(got.text).not.toContain(client.key.split('\n')[1]);
    const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).first('tls_enc');
    expect(row.tls_enc).not.toContain('PRIVATE KEY');
    expect(JSON.parse(new SecretBox(t.config.secretsKey).open(row.tls_enc, id)).clientKey).toBe(client.key);

    const delivery = await firstAttempt(await publish('mtls.right'));
    expect(delivery.status, JSON.stringify(delivery.attempts)).toBe('succeeded');
    expect(received.filter((r) => r.path === '/right').map((r) => r.subject)).toEqual(['tenant-client']);
  });

  it('fails the attempt, clearly and retryably, without a client certificate', async () => {
    // The receiver's certificate chains to the test CA, so trust alone is given: only the client certificate is missing.
    await createEndpoint('/none', 'mtls.none', undefined);
    const delivery = await firstAttempt(await publish('mtls.none'));
    // The retry may already be under way: the first attempt's record is what is asserted.
    expect(delivery.status).not.toBe('succeeded');
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'retry', errorClass: 'tls_handshake_failed', statusCode: null });
    expect(delivery.attempts[0].error).toMatch(/^tls_handshake_failed: unable to verify the receiver's certificate/);
    expect(received.some((r) => r.path === '/none')).toBe(false);
  });

  it('fails the attempt when the receiver refuses a client certificate from another CA', async () => {
    await createEndpoint('/stranger', 'mtls.stranger', { clientCertificate: strangerClient.cert, clientKey: strangerClient.key, caCertificates: ca.cert });
    const delivery = await firstAttempt(await publish('mtls.stranger'));
    expect(delivery.status).not.toBe('succeeded');
    expect(delivery.attempts[0]).toMatchObject({ outcome: 'retry', errorClass: 'tls_handshake_failed', statusCode: null });
    expect(delivery.attempts[0].error).toMatch(/^tls_handshake_failed: the receiver closed the connection before answering/);
    // Neither the attempt's error nor the delivery's last error (null while the retry is in flight) names a key or an address.
    for (const text of [delivery.lastError, delivery.attempts[0].error]) expect(String(text ?? '')).not.toMatch(/BEGIN|127\.0\.0\.1/);
    expect(received.some((r) => r.path === '/stranger')).toBe(false);
  });

  it('refuses a key that is not the certificate\'s, garbage PEM, and tls on an http URL, each at its path', async () => {
    const mismatched = await tenant.call('POST', '/v1/endpoints', { body: { url, tls: { clientCertificate: client.cert, clientKey: strangerClient.key } } });
    expectError(mismatched, 400, 'validation_failed');
    expect(mismatched.body.error.details).toEqual([{ path: 'tls.clientKey', message: 'does not match tls.clientCertificate' }]);

    const garbage = await tenant.call('POST', '/v1/endpoints', { body: { url, tls: { clientCertificate: 'not a cert', clientKey: 'nope', caCertificates: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----' } } });
    expectError(garbage, 400, 'validation_failed');
    expect(garbage.body.error.details.map((d: { path: string }) => d.path)).toEqual(['tls.clientCertificate', 'tls.clientKey', 'tls.caCertificates']);

    const plain = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/x', tls: { clientCertificate: client.cert, clientKey: client.key } } });
    expectError(plain, 400, 'validation_failed');
    expect(plain.body.error.details).toEqual([{ path: 'tls', message: 'mutual TLS needs an https url' }]);
  });

  it('PATCH replaces the certificate (rotation) and null removes it', async () => {
    const id = await createEndpoint('/rotate', 'mtls.rotate', { clientCertificate: strangerClient.cert, clientKey: strangerClient.key });
    const rotated = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { tls: { clientCertificate: client.cert, clientKey: client.key, caCertificates: ca.cert } } });
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.tls.clientCertificate.subject).toBe('CN=tenant-client');
    const toHttp = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { url: 'http://127.0.0.1:9/x' } });
    expectError(toHttp, 400, 'validation_failed');
    const removed = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { tls: null } });
    expect(removed.body.tls).toBeNull();
    expect((await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).first('tls_enc')).tls_enc).toBeNull();
  });

  it('refuses, at attempt time and saying why, to send a client certificate through the egress proxy', async () => {
    // Nothing listens at the proxy's address: the refusal must come before any connection is tried.
    const proxied = await startTestPlatform({ env: { EGRESS_PROXY_URL: 'http://127.0.0.1:9' } });
    try {
      const other = await proxied.createTenant('mtls-proxy');
      const created = await other.call('POST', '/v1/endpoints', {
        body: { url: `${url}/proxied`, eventTypes: ['mtls.proxied'], tls: { clientCertificate: client.cert, clientKey: client.key, caCertificates: ca.cert } },
      });
      expect(created.status, created.text).toBe(201);
      const published = await other.call('POST', '/v1/events', { body: { type: 'mtls.proxied', data: {} } });
      const delivery = await eventually(async () => {
        const ev = await other.call('GET', `/v1/events/${published.body.id as string}`);
        const id = (ev.body.deliveries as { id: string }[])[0]?.id;
        const d = id && (await other.call('GET', `/v1/deliveries/${id}`));
        return d && d.body.status === 'dead' && d.body;
      }, 'the delivery was dead-lettered');
      expect(delivery.lastError).toBe('mutual TLS is not supported through the egress proxy; list this host in EGRESS_NO_PROXY');
      expect(received.some((r) => r.path === '/proxied')).toBe(false);
    } finally {
      await proxied.stop();
    }
  });
});
