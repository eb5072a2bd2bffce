import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, listAll } from '../helpers/api.js';
import { createEndpoint, publish, settledDelivery } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer, apiKeyId, bulkReplay, replayOne } from '../helpers/replay.js';

interface Entry {
  id: string;
  actor: { type: string; id: string | null };
  action: string;
  target: { type: string; id: string };
  reason: string | null;
  details: Record<string, unknown>;
  createdAt: string;
}

/**
 * Every change an operator may later have to explain leaves an entry: who (API key, admin or the
 * system), what, on what, why, and when. Tenant A performs one of each; tenant B must see none.
 */
describe('audit log', () => {
  let t: TestPlatform;
  let a: TestTenant;
  let b: TestTenant;
  let r: Receiver;
  let gone: Receiver;
  let keyA: string;
  /** Each action with the time window it ran in, to check the entry's createdAt. */
  const done: Array<{ action: string; targetId: string; from: number; to: number }> = [];
  let midpoint: Date;
  let ids: { endpoint: string; deleted: string; gone: string; delivery: string; replay: string };

  const timed = async <T>(action: string, targetId: () => string, work: () => Promise<T>): Promise<T> => {
    const from = Date.now();
    const result = await work();
    done.push({ action, targetId: targetId(), from, to: Date.now() });
    return result;
  };
  const entries = async (query = ''): Promise<Entry[]> => (await listAll<Entry>(a, `/v1/audit-log${query}`, 500)).items;

  beforeAll(async () => {
    t = await startTestPlatform();
    const from = Date.now();
    a = await t.createTenant('audited');
    done.push({ action: 'tenant.created', targetId: a.id, from, to: Date.now() });
    b = await t.createTenant('bystander');
    keyA = await apiKeyId(t, a.id);
    r = await startReceiver(answer(400));
    gone = await startReceiver(answer(410));

    let endpoint = '';
    await timed('endpoint.created', () => endpoint, async () => (endpoint = (await createEndpoint(a, { url: `${r.url}/a`, eventTypes: ['order.*'] })).id));
    await timed('endpoint.updated', () => endpoint, () => a.call('PATCH', `/v1/endpoints/${endpoint}`, { body: { description: 'orders', maxConcurrency: 3 } }));
    await timed('endpoint.secret_rotated', () => endpoint, () => a.call('POST', `/v1/endpoints/${endpoint}/secret/rotate`));
    await timed('endpoint.disabled', () => endpoint, () => a.call('PATCH', `/v1/endpoints/${endpoint}`, { body: { status: 'disabled' } }));
    midpoint = new Date();
    await new Promise((res) => setTimeout(res, 5));
    await timed('endpoint.enabled', () => endpoint, () => a.call('PATCH', `/v1/endpoints/${endpoint}`, { body: { status: 'active' } }));

    let deleted = '';
    await timed('endpoint.created', () => deleted, async () => (deleted = (await createEndpoint(a, { url: `${r.url}/tmp` })).id));
    await timed('endpoint.deleted', () => deleted, () => a.call('DELETE', `/v1/endpoints/${deleted}`));

    const delivery = await settledDelivery(a, await publish(a, 'order.created'));
    await timed('delivery.replayed', () => delivery.id, () => replayOne(a, delivery.id, 'receiver fixed'));
    await settledDelivery(a, delivery.eventId);
    let replay = '';
    await timed('replay.started', () => replay, async () => {
      const res = await bulkReplay(a, { filter: { endpointId: endpoint }, reason: 'second chance' });
      replay = res.body.id;
    });

    // A 410 makes the platform itself disable the endpoint.
    let goneEp = '';
    await timed('endpoint.created', () => goneEp, async () => (goneEp = (await createEndpoint(a, { url: `${gone.url}/gone`, eventTypes: ['gone.*'] })).id));
    const from410 = Date.now();
    await publish(a, 'gone.away');
    await eventually(async () => (await a.call('GET', `/v1/endpoints/${goneEp}`)).body.status === 'disabled', 'auto-disabled by the 410');
    // The audit entry is written just after the endpoint changes; wait for it before closing the window.
    await eventually(async () => (await a.call('GET', `/v1/audit-log?targetId=${goneEp}&action=endpoint.auto_disabled`)).body.data.length === 1, 'auto-disable audited');
    done.push({ action: 'endpoint.auto_disabled', targetId: goneEp, from: from410, to: Date.now() });
    ids = { endpoint, deleted, gone: goneEp, delivery: delivery.id, replay };
  });
  afterAll(async () => {
    await r.close();
    await gone.close();
    await t.stop();
  });

  it('records actor, action, target, reason and time for every audited change, newest first', async () => {
    const all = await entries();
    expect(all.map((e) => [e.action, e.target.id])).toEqual([...done].reverse().map((d) => [d.action, d.targetId]));
    for (const d of done) {
      const e = all.find((x) => x.action === d.action && x.target.id === d.targetId)!;
      const at = new Date(e.createdAt).getTime();
      // The database clock and this process's clock are the same machine's; allow a little skew.
      expect(at, `${d.action} time`).toBeGreaterThanOrEqual(d.from - 50);
      expect(at, `${d.action} time`).toBeLessThanOrEqual(d.to + 50);
      expect(e.id).toMatch(/^aud_/);
    }
    const one = (action: string, targetId: string) => all.find((e) => e.action === action && e.target.id === targetId);
    expect(one('tenant.created', a.id)).toMatchObject({ actor: { type: 'admin', id: null }, target: { type: 'tenant', id: a.id }, details: { name: 'audited', apiKeyId: keyA } });
    const byKey = { type: 'api_key', id: keyA };
    expect(one('endpoint.created', ids.endpoint)).toMatchObject({ actor: byKey, target: { type: 'endpoint' }, details: { url: `${r.url}/a` } });
    const updated = one('endpoint.updated', ids.endpoint)!;
    expect(updated).toMatchObject({
      actor: byKey,
      details: {
        changed: expect.arrayContaining(['description', 'max_concurrency']),
        before: { description: null, max_concurrency: expect.any(Number) },
        after: { description: 'orders', max_concurrency: 3 },
      },
    });
    expect((updated.details.before as Record<string, unknown>).max_concurrency).not.toBe(3);
    expect(one('endpoint.secret_rotated', ids.endpoint)).toMatchObject({ actor: byKey, target: { type: 'endpoint', id: ids.endpoint } });
    expect(one('endpoint.disabled', ids.endpoint)).toMatchObject({ actor: byKey });
    expect(one('endpoint.enabled', ids.endpoint)).toMatchObject({ actor: byKey });
    expect(one('endpoint.deleted', ids.deleted)).toMatchObject({ actor: byKey, target: { type: 'endpoint', id: ids.deleted } });
    expect(one('delivery.replayed', ids.delivery)).toMatchObject({ actor: byKey, target: { type: 'delivery' }, reason: 'receiver fixed' });
    expect(one('replay.started', ids.replay)).toMatchObject({
      actor: byKey,
      target: { type: 'replay' },
      reason: 'second chance',
      details: { filter: { endpointId: ids.endpoint }, count: 1 },
    });
    expect(one('endpoint.auto_disabled', ids.gone)).toMatchObject({ actor: { type: 'system', id: null }, reason: expect.stringContaining('410') });
  });

  it('filters by action, target, target type and time range', async () => {
    const actions = (list: Entry[]) => list.map((e) => e.action);
    expect((await entries('?action=endpoint.created')).map((e) => e.target.id)).toEqual([ids.gone, ids.deleted, ids.endpoint]);
    expect(actions(await entries(`?targetId=${ids.endpoint}`))).toEqual(['endpoint.enabled', 'endpoint.disabled', 'endpoint.secret_rotated', 'endpoint.updated', 'endpoint.created']);
    expect(actions(await entries(`?targetId=${ids.endpoint}&action=endpoint.disabled`))).toEqual(['endpoint.disabled']);
    expect(actions(await entries('?targetType=replay'))).toEqual(['replay.started']);
    expect(actions(await entries(`?targetId=${ids.endpoint}&until=${midpoint.toISOString()}`))).toEqual([
      'endpoint.disabled', 'endpoint.secret_rotated', 'endpoint.updated', 'endpoint.created',
    ]);
    expect(actions(await entries(`?targetId=${ids.endpoint}&since=${midpoint.toISOString()}`))).toEqual(['endpoint.enabled']);
    expect(await entries('?action=no.such.action')).toEqual([]);
    expectError(await a.call('GET', '/v1/audit-log?since=yesterday'), 400, 'validation_failed');
  });

  it('pages with limit and cursor: every entry exactly once, in order', async () => {
    const all = (await entries()).map((e) => e.id);
    expect(all.length).toBe(done.length);
    for (const size of [1, 2, 5]) {
      const { items, pages } = await listAll<Entry>(a, '/v1/audit-log', size);
      expect(items.map((e) => e.id)).toEqual(all);
      expect(pages).toBe(Math.ceil(all.length / size));
    }
    const filtered = await listAll<Entry>(a, `/v1/audit-log?targetId=${ids.endpoint}`, 2);
    expect(filtered.items).toHaveLength(5);
    expect(new Set(filtered.items.map((e) => e.id)).size).toBe(5);
    expectError(await a.call('GET', '/v1/audit-log?cursor=not-a-cursor'), 400, 'invalid_cursor');
  });

  it("is tenant-scoped: B sees only its own creation, and A's ids as filters give nothing", async () => {
    const bAll = (await listAll<Entry>(b, '/v1/audit-log', 500)).items;
    expect(bAll.map((e) => [e.action, e.target.id])).toEqual([['tenant.created', b.id]]);
    for (const id of Object.values(ids)) {
      expect((await b.call('GET', `/v1/audit-log?targetId=${id}`)).body.data).toEqual([]);
    }
    expect((await b.call('GET', `/v1/audit-log?targetId=${a.id}`)).body.data).toEqual([]);
    // A's entries are A's own; B's creation never shows up there.
    expect((await entries()).some((e) => e.target.id === b.id)).toBe(false);
  });
});

/** Sources and API keys are audited too, with values before and after, but never a secret or a key. */
describe('audit log: sources, API keys and what is never recorded', () => {
  let t: TestPlatform;
  let a: TestTenant;

  beforeAll(async () => {
    t = await startTestPlatform({ role: 'api' });
    a = await t.createTenant('audited sources');
  });
  afterAll(async () => {
    await t.stop();
  });

  const entries = async (query = ''): Promise<Entry[]> => (await listAll<Entry>(a, `/v1/audit-log${query}`, 500)).items;

  it('records source creation, changes (before and after) and deletion, and API key creation and revocation', async () => {
    const keyA = await apiKeyId(t, a.id);
    const byKey = { type: 'api_key', id: keyA };
    const secrets = ['whsec_' + Buffer.from('first secret of the source!!').toString('base64'), 'whsec_' + Buffer.from('second secret of the source!').toString('base64')];
    const providerKeys = ['provider-api-key-one-0123456789', 'provider-api-key-two-0123456789'];

    const created = await a.call('POST', '/v1/sources', {
      body: { type: 'momo-communication', name: 'sms', secret: secrets[0], reconcile: { baseUrl: 'https://api.momo.example.com', apiKey: providerKeys[0] } },
    });
    expect(created.status, created.text).toBe(201);
    const source = created.body.id as string;
    const patched = await a.call('PATCH', `/v1/sources/${source}`, {
      body: { name: 'sms v2', secret: secrets[1], reconcile: { baseUrl: 'https://api2.momo.example.com', apiKey: providerKeys[1], afterSeconds: 60 } },
    });
    expect(patched.status, patched.text).toBe(200);
    expect((await a.call('DELETE', `/v1/sources/${source}`)).status).toBe(204);

    const key = await a.call('POST', '/v1/api-keys', { body: { name: 'deploy bot' } });
    expect(key.status).toBe(201);
    expect((await a.call('DELETE', `/v1/api-keys/${key.body.id}`)).status).toBe(204);
    const adminKey = await t.call('POST', `/admin/tenants/${a.id}/api-keys`, { token: t.config.adminToken, body: { name: 'issued by admin' } });
    expect(adminKey.status).toBe(201);

    const endpoint = await a.call('POST', '/v1/endpoints', { body: { url: 'https://hooks.example.com/in' } });
    expect((await a.call('PATCH', `/v1/endpoints/${endpoint.body.id}`, { body: { url: 'https://hooks.example.com/v2' } })).status).toBe(200);

    const all = await entries();
    const one = (action: string, targetId: string) => all.find((e) => e.action === action && e.target.id === targetId);
    expect(one('source.created', source)).toMatchObject({
      actor: byKey,
      target: { type: 'source', id: source },
      details: { type: 'momo-communication', name: 'sms', reconcile: { baseUrl: 'https://api.momo.example.com', afterSeconds: 300 } },
    });
    expect(one('source.updated', source)).toMatchObject({
      actor: byKey,
      details: {
        changed: ['name', 'secret', 'reconcile'],
        before: { name: 'sms', reconcile: { baseUrl: 'https://api.momo.example.com', afterSeconds: 300 } },
        after: { name: 'sms v2', reconcile: { baseUrl: 'https://api2.momo.example.com', afterSeconds: 60 } },
        previousSecretExpiresAt: patched.body.previousSecretExpiresAt,
      },
    });
    expect(one('source.deleted', source)).toMatchObject({ actor: byKey, target: { type: 'source', id: source } });
    expect(one('api_key.created', key.body.id)).toMatchObject({ actor: byKey, target: { type: 'api_key' }, details: { name: 'deploy bot', prefix: key.body.key.slice(0, 11) } });
    expect(one('api_key.revoked', key.body.id)).toMatchObject({ actor: byKey, details: { name: 'deploy bot' } });
    expect(one('api_key.created', adminKey.body.id)).toMatchObject({ actor: { type: 'admin', id: null }, details: { name: 'issued by admin' } });
    expect(one('endpoint.updated', endpoint.body.id)).toMatchObject({
      details: { changed: ['url'], before: { url: 'https://hooks.example.com/in' }, after: { url: 'https://hooks.example.com/v2' } },
    });

    // Neither a source secret, a provider API key nor an API key appears anywhere in the log.
    const text = JSON.stringify(all);
    for (const hidden of [...secrets, ...providerKeys, key.body.key, adminKey.body.key, endpoint.body.secret]) expect(text).not.toContain(hidden);
  });
});
