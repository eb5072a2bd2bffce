import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation, communication, standard } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

const run = promisify(execFile);

/** The whole database as an operator's backup would hold it. */
async function pgDump(databaseUrl: string): Promise<string> {
  const url = new URL(databaseUrl);
  const { stdout } = await run(
    'pg_dump',
    ['-h', url.hostname, '-p', url.port || '5432', '-U', decodeURIComponent(url.username || 'postgres'), '--no-password', url.pathname.slice(1)],
    { maxBuffer: 256 * 1024 * 1024, env: { ...process.env, PGPASSWORD: decodeURIComponent(url.password) } },
  );
  return stdout;
}

/** A secret must not be in the dump in any of the forms a careless column type would keep it in. */
function forms(secret: string): string[] {
  const out = [secret, Buffer.from(secret).toString('hex'), Buffer.from(secret).toString('base64')];
  if (secret.startsWith('whsec_')) {
    const key = secret.slice('whsec_'.length);
    out.push(key, Buffer.from(key, 'base64').toString('hex'));
  }
  return out;
}

describe('secrets at rest', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  const secrets: Record<string, string> = {};
  const visible: string[] = [];

  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver();
    secrets.adminToken = t.config.adminToken;
    secrets.secretsKey = t.env.SECRETS_KEY!;

    for (const name of ['tenant-1', 'tenant-2']) {
      const tenant = await t.createTenant(name);
      secrets[`${name} api key`] = tenant.apiKey;
      visible.push(tenant.id);

      // Sources with secrets the test knows, and one the platform generates.
      const known = {
        'momo-communication': `comm-plaintext-${randomBytes(12).toString('hex')}`,
        'momo-automation': `auto-plaintext-${randomBytes(12).toString('hex')}`,
        'standard-webhooks': `whsec_${randomBytes(32).toString('base64')}`,
      };
      const sources: Record<string, { id: string; secret: string }> = {};
      for (const [type, secret] of Object.entries(known)) {
        const reconcileKey = `reconcile-key-${randomBytes(12).toString('hex')}`;
        const res = await tenant.call('POST', '/v1/sources', {
          body: { type, name: type, secret, ...(type === 'momo-communication' ? { reconcile: { baseUrl: 'https://api.momo.example.com', apiKey: reconcileKey } } : {}) },
        });
        expect(res.status).toBe(201);
        secrets[`${name} ${type} source secret`] = secret;
        if (type === 'momo-communication') secrets[`${name} reconcile api key`] = reconcileKey;
        sources[type] = { id: res.body.id, secret };
        visible.push(res.body.id);
      }
      const generated = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'generated' } });
      secrets[`${name} generated source secret`] = generated.body.secret;

      // Endpoints, one of them rotated so both the current and the previous secret are stored.
      const ep = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/${name}` } });
      secrets[`${name} endpoint secret`] = ep.body.secret;
      visible.push(uuidOf('endpoint', ep.body.id));
      const rotated = await tenant.call('POST', `/v1/endpoints/${ep.body.id}/secret/rotate`);
      secrets[`${name} rotated endpoint secret`] = rotated.body.secret;
      const other = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/${name}/2`, eventTypes: ['order.*'] } });
      secrets[`${name} second endpoint secret`] = other.body.secret;
      // An Ed25519 endpoint: its private key is never shown, so the test opens it to look for it;
      // and a custom header whose value is a credential of the receiver's.
      const signed = await tenant.call('POST', '/v1/endpoints', {
        body: { url: `${receiver.url}/${name}/3`, eventTypes: ['never.sent'], signature: { scheme: 'ed25519' }, headers: { 'X-Receiver-Key': `hdr-${randomBytes(12).toString('hex')}` } },
      });
      expect(signed.status, signed.text).toBe(201);
      visible.push(uuidOf('endpoint', signed.body.id));
      const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', signed.body.id) }).first('secret_enc', 'headers_enc');
      const box = new SecretBox(t.config.secretsKey);
      const privateKey = box.open(row.secret_enc, signed.body.id);
      expect(privateKey).toMatch(/^whsk_/);
      secrets[`${name} ed25519 private key`] = privateKey;
      secrets[`${name} ed25519 private key, raw`] = privateKey.slice('whsk_'.length);
      secrets[`${name} endpoint header value`] = (JSON.parse(box.open(row.headers_enc, signed.body.id)) as Record<string, string>)['X-Receiver-Key']!;

      // Traffic through every table: callbacks (receipts), events, deliveries and attempts.
      const comm = communication.messageStatus(`m-${name}`, 'delivered');
      expect((await t.call('POST', `/inbound/${sources['momo-communication']!.id}`, { rawBody: comm, headers: communication.headers(sources['momo-communication']!.secret, comm) })).status).toBe(200);
      const auto = automation.body(`8a6f2b1e-0000-4000-8000-${randomBytes(6).toString('hex')}`);
      expect((await t.call('POST', `/inbound/${sources['momo-automation']!.id}`, { rawBody: auto, headers: automation.headers(sources['momo-automation']!.secret, auto) })).status).toBe(200);
      const sw = JSON.stringify({ type: 'order.paid', data: {} });
      expect((await t.call('POST', `/inbound/${sources['standard-webhooks']!.id}`, { rawBody: sw, headers: standard.headers(sources['standard-webhooks']!.secret, `msg_${name}`, sw) })).status).toBe(200);
      await publish(tenant, { type: 'order.created', messageId: `api-${name}`, data: { hello: name } });
    }
    await eventually(async () => {
      const unsettled = Number((await t.platform.db('deliveries').whereNot({ status: 'succeeded' }).count({ n: '*' }))[0]?.n);
      const attempts = Number((await attemptsListed(t.platform.db).count({ n: '*' }))[0]?.n);
      return unsettled === 0 && attempts > 0;
    }, 'every delivery attempted');
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  it('a pg_dump contains no plaintext secret, endpoint secret or API key, in any common encoding', async () => {
    const dump = await pgDump(t.database.url);
    // The dump is real: the rows are in it.
    for (const id of visible) expect(dump).toContain(id);
    expect(dump).toContain('v1:'); // sealed secrets are there, just not readable

    const leaks = Object.entries(secrets).flatMap(([what, secret]) => forms(secret).filter((form) => dump.includes(form)).map(() => what));
    expect(leaks).toEqual([]);
  });

  it('the stored secrets are sealed with SECRETS_KEY: the same ciphertext does not open with another key', async () => {
    const row = await t.platform.db('sources').where({ name: 'momo-automation' }).first();
    expect(new SecretBox(t.config.secretsKey).open(row.secret_enc, row.id)).toMatch(/^auto-plaintext-/);
    expect(() => new SecretBox(randomBytes(32)).open(row.secret_enc, row.id)).toThrow();
    // Bound to its row: a ciphertext copied onto another source does not open there.
    const other = await t.platform.db('sources').whereNot({ id: row.id }).first();
    expect(() => new SecretBox(t.config.secretsKey).open(row.secret_enc, other.id)).toThrow();
  });
});
