// An Ed25519 endpoint as its receiver sees it, verified with node:crypto from the Standard Webhooks
// specification's own text (the `standardwebhooks` package verifies only `v1`): nothing here comes
// from src/, so a mistake in the platform's signing cannot hide behind the same mistake here.
//
// The spec: `webhook-signature` holds space-delimited `<version>,<base64 signature>` entries; `v1a`
// is Ed25519 over `<webhook-id>.<webhook-timestamp>.<body>`; the public key is `whpk_` followed by
// the base64 of its 32 bytes.
import { createPublicKey, verify, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';

/** The SubjectPublicKeyInfo DER header of an Ed25519 key (RFC 8410); the raw 32 bytes follow. */
const SPKI_ED25519 = Buffer.from('302a300506032b6570032100', 'hex');

function publicKeyFrom(whpk: string): KeyObject {
  expect(whpk).toMatch(/^whpk_[A-Za-z0-9+/]{43}=$/);
  const raw = Buffer.from(whpk.slice('whpk_'.length), 'base64');
  expect(raw).toHaveLength(32);
  return createPublicKey({ key: Buffer.concat([SPKI_ED25519, raw]), format: 'der', type: 'spki' });
}

/** The `v1a` entries of a received request. */
const v1aEntries = (r: ReceivedRequest) =>
  String(r.headers['webhook-signature'])
    .split(' ')
    .filter((e) => e.startsWith('v1a,'))
    .map((e) => e.slice(4));

/** Whether one base64 Ed25519 signature verifies the request's id, timestamp and body. */
function verifies(publicKey: KeyObject, r: ReceivedRequest, signature: string, body = r.body): boolean {
  const content = Buffer.from(`${String(r.headers['webhook-id'])}.${String(r.headers['webhook-timestamp'])}.${body}`, 'utf8');
  return verify(null, content, publicKey, Buffer.from(signature, 'base64'));
}

describe('Ed25519 (v1a) signatures', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let receiver: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver.close();
    await t.stop();
  });

  const publish = async (key: string) => {
    const res = await tenant.call('POST', '/v1/events', { body: { type: 'order.created', data: { key, text: 'héllo ✓' } }, headers: { 'idempotency-key': key } });
    expect(res.status, res.text).toBe(202);
    return res.body.id as string;
  };
  const received = (eventId: string) => eventually(async () => receiver.requests.find((r) => r.headers['webhook-id'] === eventId), `delivery of ${eventId}`);

  it('signs with the private key the platform holds; the public key from the API verifies, a changed body does not', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/ed`, signature: { scheme: 'ed25519' } } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.secret).toBeUndefined();
    expect(created.body.signature.scheme).toBe('ed25519');
    const publicKeyText = created.body.signature.publicKey as string;
    const publicKey = publicKeyFrom(publicKeyText);

    // GET shows the same public key, and the secret route shows it too, never a private key.
    const got = await tenant.call('GET', `/v1/endpoints/${created.body.id}`);
    expect(got.body.signature).toEqual({ scheme: 'ed25519', publicKey: publicKeyText });
    const shown = await tenant.call('GET', `/v1/endpoints/${created.body.id}/secret`);
    expect(shown.status).toBe(200);
    expect(shown.body).toEqual({ publicKey: publicKeyText, previousSecretExpiresAt: null });
    expect(JSON.stringify([created.body, got.body, shown.body])).not.toContain('whsk_');

    const eventId = await publish('ed-1');
    const r = await received(eventId);
    expect(String(r.headers['webhook-signature'])).toMatch(/^v1a,[A-Za-z0-9+/]{86}==$/);
    const [signature] = v1aEntries(r);
    expect(verifies(publicKey, r, signature!)).toBe(true);
    expect(verifies(publicKey, r, signature!, r.body.replace('héllo', 'hello'))).toBe(false);
    // Another key pair's public key does not verify it.
    const other = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/other`, signature: { scheme: 'ed25519' } } });
    expect(verifies(publicKeyFrom(other.body.signature.publicKey), r, signature!)).toBe(false);
    await tenant.call('DELETE', `/v1/endpoints/${other.body.id}`);
    await tenant.call('DELETE', `/v1/endpoints/${created.body.id}`);
  });

  it('rotation makes a new key pair; both sign for the overlap and each verifies with its own public key', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/rotate`, signature: { scheme: 'ed25519' } } });
    const oldKey = created.body.signature.publicKey as string;
    const rotated = await tenant.call('POST', `/v1/endpoints/${created.body.id}/secret/rotate`);
    expect(rotated.status, rotated.text).toBe(200);
    expect(rotated.body.secret).toBeUndefined();
    const newKey = rotated.body.publicKey as string;
    expect(newKey).not.toBe(oldKey);
    expect(Date.parse(rotated.body.previousSecretExpiresAt) - Date.now()).toBeGreaterThan(23 * 3600 * 1000);
    expect((await tenant.call('GET', `/v1/endpoints/${created.body.id}`)).body.signature.publicKey).toBe(newKey);

    const r = await received(await publish('ed-rotated'));
    const entries = v1aEntries(r);
    expect(entries).toHaveLength(2);
    expect(String(r.headers['webhook-signature']).split(' ')).toHaveLength(2);
    const byOld = entries.filter((s) => verifies(publicKeyFrom(oldKey), r, s));
    const byNew = entries.filter((s) => verifies(publicKeyFrom(newKey), r, s));
    expect(byOld).toHaveLength(1);
    expect(byNew).toHaveLength(1);
    expect(byOld[0]).not.toBe(byNew[0]);
    await tenant.call('DELETE', `/v1/endpoints/${created.body.id}`);
  });

  it('keeps hmac as the default and refuses to change the scheme of an endpoint', async () => {
    const hmac = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/hmac` } });
    expect(hmac.status).toBe(201);
    expect(hmac.body.secret).toMatch(/^whsec_/);
    expect(hmac.body.signature).toEqual({ scheme: 'hmac' });
    const change = await tenant.call('PATCH', `/v1/endpoints/${hmac.body.id}`, { body: { signature: { scheme: 'ed25519' } } });
    expect(change.status).toBe(400);
    expect(change.text).toContain('signature.scheme');
    const same = await tenant.call('PATCH', `/v1/endpoints/${hmac.body.id}`, { body: { signature: { scheme: 'hmac' } } });
    expect(same.status).toBe(200);
    const unknown = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/x`, signature: { scheme: 'rsa' } } });
    expect(unknown.status).toBe(400);
    await tenant.call('DELETE', `/v1/endpoints/${hmac.body.id}`);
  });
});
