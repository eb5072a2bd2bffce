import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateWebhookSecret } from '../../src/domain/signing.js';
import type { SourceType } from '../../src/domain/sources.js';
import { expectError } from '../helpers/api.js';
import { createSource, postCallback, sign, type Callback } from '../helpers/intake.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { githubPush, presets, shopifyOrder, stripeEvent } from '../helpers/provider-presets.js';
import { automation, communication } from '../helpers/providers.js';

const dayMs = 86_400_000;

/** A fresh, correctly shaped secret and a callback (new body each time) signed with any secret. */
const providers: Record<SourceType, { secret: () => string; callback: (secret: string) => Callback | Promise<Callback> }> = {
  'momo-communication': {
    secret: () => randomUUID(),
    callback: (secret) => sign.communication(secret, communication.messageStatus(`m-${randomUUID()}`, 'delivered')),
  },
  'momo-automation': { secret: () => randomUUID(), callback: (secret) => sign.automation(secret, automation.body(randomUUID())) },
  'standard-webhooks': { secret: generateWebhookSecret, callback: (secret) => sign.standard(secret, JSON.stringify({ type: 'order.paid', data: {} })) },
  stripe: { secret: () => `whsec_${randomUUID()}`, callback: (secret) => presets.stripe(secret, stripeEvent()) },
  github: { secret: () => randomUUID(), callback: (secret) => presets.github(secret, githubPush()) },
  shopify: { secret: () => randomUUID(), callback: (secret) => presets.shopify(secret, shopifyOrder()) },
  hmac: { secret: () => randomUUID(), callback: (secret) => sign.communication(secret, JSON.stringify({ type: 'order.paid', id: randomUUID() })) },
};

describe('sources: PATCH and DELETE', () => {
  let a: TestPlatform;
  let tenant: TestTenant;
  let other: TestTenant;

  beforeAll(async () => {
    a = await startTestPlatform({ role: 'api' });
    tenant = await a.createTenant('sources-manage');
    other = await a.createTenant('bystander');
  });
  afterAll(async () => {
    await a?.stop();
  });

  it('renames a source and changes or removes its reconciliation, never showing the provider API key', async () => {
    const source = await createSource(tenant, 'momo-communication');
    const before = (await tenant.call('GET', `/v1/sources/${source.id}`)).body;
    const renamed = await tenant.call('PATCH', `/v1/sources/${source.id}`, { body: { name: 'SMS callbacks' } });
    expect(renamed.status, renamed.text).toBe(200);
    expect(renamed.body).toEqual({ ...before, name: 'SMS callbacks', updatedAt: expect.any(String) });
    expect(renamed.body.secret).toBeUndefined();
    expect(new Date(renamed.body.updatedAt).getTime()).toBeGreaterThan(new Date(before.updatedAt).getTime());
    expect((await tenant.call('GET', `/v1/sources/${source.id}`)).body.name).toBe('SMS callbacks');

    const apiKey = `provider-key-${randomUUID()}`;
    const reconciled = await tenant.call('PATCH', `/v1/sources/${source.id}`, { body: { reconcile: { baseUrl: 'https://api.momo.example.com', apiKey, afterSeconds: 60 } } });
    expect(reconciled.body.reconcile).toEqual({ baseUrl: 'https://api.momo.example.com', afterSeconds: 60 });
    expect(reconciled.text).not.toContain(apiKey);
    const stopped = await tenant.call('PATCH', `/v1/sources/${source.id}`, { body: { reconcile: null } });
    expect(stopped.body.reconcile).toBeNull();
    expect(await a.platform.db('sources').where({ id: source.id }).first('reconcile_api_key_enc')).toEqual({ reconcile_api_key_enc: null });
  });

  it('refuses an empty, unknown or invalid change, and answers 404 for an unknown or foreign source', async () => {
    const source = await createSource(tenant, 'standard-webhooks');
    const patch = (body: unknown, id = source.id) => tenant.call('PATCH', `/v1/sources/${id}`, { body });
    for (const body of [{}, { name: '' }, { secret: 'short' }, { type: 'momo-automation' }, { reconcile: { baseUrl: 'ftp://x.example.com', apiKey: 'k' } }, { name: 'x', color: 'red' }]) {
      expectError(await patch(body), 400, 'validation_failed');
    }
    expectError(await tenant.call('PATCH', `/v1/sources/${source.id}`, { rawBody: '{"name":"x"}', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    expectError(await patch({ name: 'x' }, 'src_01jzzzzzzzzzzzzzzzzzzzzzzz'), 404, 'not_found');
    expectError(await other.call('PATCH', `/v1/sources/${source.id}`, { body: { name: 'stolen' } }), 404, 'not_found');
    expectError(await other.call('DELETE', `/v1/sources/${source.id}`), 404, 'not_found');
    expectError(await a.call('PATCH', `/v1/sources/${source.id}`, { body: { name: 'x' } }), 401, 'unauthorized');
    expect((await tenant.call('GET', `/v1/sources/${source.id}`)).body.name).toBe('standard-webhooks source');
  });

  describe.each(Object.keys(providers) as SourceType[])('a new secret for a %s source', (type) => {
    const provider = providers[type];

    it('keeps the previous secret verifying for 24 h, and refuses it once that time has passed', async () => {
      const oldSecret = provider.secret();
      const newSecret = provider.secret();
      const source = await createSource(tenant, type, oldSecret);
      expect((await postCallback(a, source.id, await provider.callback(oldSecret))).status).toBe(200);

      const changedAt = Date.now();
      const res = await tenant.call('PATCH', `/v1/sources/${source.id}`, { body: { secret: newSecret } });
      expect(res.status, res.text).toBe(200);
      expect(res.text).not.toContain(newSecret);
      const expiresAt = new Date(res.body.previousSecretExpiresAt).getTime();
      expect(expiresAt).toBeGreaterThanOrEqual(changedAt + dayMs - 1_000);
      expect(expiresAt).toBeLessThanOrEqual(Date.now() + dayMs + 1_000);
      expect((await tenant.call('GET', `/v1/sources/${source.id}`)).body.previousSecretExpiresAt).toBe(res.body.previousSecretExpiresAt);

      // During the grace window both verify; anything else does not.
      expect((await postCallback(a, source.id, await provider.callback(newSecret))).status).toBe(200);
      expect((await postCallback(a, source.id, await provider.callback(oldSecret))).status).toBe(200);
      expectError(await postCallback(a, source.id, await provider.callback(provider.secret())), 401, 'bad_signature');

      // The 24 h have passed (as far as the database knows): a process that reads the source now
      // refuses the old secret and accepts the new one.
      await a.platform.db('sources').where({ id: source.id }).update({ previous_secret_expires_at: new Date(Date.now() - 1_000) });
      const b = await startTestPlatform({ role: 'api', database: a.database, env: { SECRETS_KEY: a.env.SECRETS_KEY! } });
      try {
        expectError(await postCallback(b, source.id, await provider.callback(oldSecret)), 401, 'bad_signature');
        expect((await postCallback(b, source.id, await provider.callback(newSecret))).status).toBe(200);
      } finally {
        await b.stop();
      }
      expect((await tenant.call('GET', `/v1/sources/${source.id}`)).body.previousSecretExpiresAt).toBeNull();
    });
  });

  it('deletes a source: callbacks answer 404, it leaves the API, and its events stay listed', async () => {
    const source = await createSource(tenant, 'standard-webhooks');
    const accepted = await postCallback(a, source.id, await providers['standard-webhooks'].callback(source.secret));
    expect(accepted.status).toBe(200);

    expect((await tenant.call('DELETE', `/v1/sources/${source.id}`)).status).toBe(204);
    expectError(await postCallback(a, source.id, await providers['standard-webhooks'].callback(source.secret)), 404, 'not_found');
    expectError(await tenant.call('GET', `/v1/sources/${source.id}`), 404, 'not_found');
    expectError(await tenant.call('PATCH', `/v1/sources/${source.id}`, { body: { name: 'back' } }), 404, 'not_found');
    expectError(await tenant.call('DELETE', `/v1/sources/${source.id}`), 404, 'not_found');
    const listed = await tenant.call('GET', '/v1/sources?limit=500');
    expect(listed.body.data.map((s: { id: string }) => s.id)).not.toContain(source.id);

    // A process that never saw the source answers 404 as well.
    const b = await startTestPlatform({ role: 'api', database: a.database, env: { SECRETS_KEY: a.env.SECRETS_KEY! } });
    try {
      expectError(await postCallback(b, source.id, await providers['standard-webhooks'].callback(source.secret)), 404, 'not_found');
    } finally {
      await b.stop();
    }

    const event = await tenant.call('GET', `/v1/events/${accepted.body.eventId}`);
    expect(event.status).toBe(200);
    expect(event.body).toMatchObject({ id: accepted.body.eventId, sourceId: source.id, receiptCount: 1 });
    const events = await tenant.call('GET', '/v1/events?limit=500');
    expect(events.body.data.map((e: { id: string }) => e.id)).toContain(accepted.body.eventId);
  });
});
