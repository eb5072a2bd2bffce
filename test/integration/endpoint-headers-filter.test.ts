import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { expectError } from '../helpers/api.js';
import { createSource, expectOutcome, postCallback, sign, type TestSource } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * An endpoint's own headers and its content filter, through the API and at real receivers:
 * headers arrive on every attempt and can never replace the platform's; a filtered endpoint gets
 * only the events that match it (big integers compared exactly), an unfiltered one gets all.
 */

let t: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;

beforeAll(async () => {
  t = await startTestPlatform();
  tenant = await t.createTenant('headers-filter');
  receiver = await startReceiver();
});
afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

/** A JSON body sent as written: numbers JSON.stringify would round reach the server intact. */
const raw = (text: string) => ({ rawBody: text, headers: { 'content-type': 'application/json' } });
const received = (path: string) => receiver.requests.filter((r) => r.path === path);

async function publishRaw(type: string, dataText: string, by = tenant): Promise<string> {
  const res = await by.call('POST', '/v1/events', raw(`{"type": ${JSON.stringify(type)}, "data": ${dataText}}`));
  expect(res.status, res.text).toBe(202);
  return res.body.id as string;
}

/** The endpoints an event got a delivery for: decided when it was published, before any request. */
async function deliveredTo(eventId: string, by = tenant): Promise<string[]> {
  const res = await by.call('GET', `/v1/events/${eventId}`);
  expect(res.status, res.text).toBe(200);
  return (res.body.deliveries as Array<{ endpointId: string }>).map((d) => d.endpointId).sort();
}

describe('endpoint headers', () => {
  it('refuses platform names and bad values, listing every problem with its path', async () => {
    const res = await tenant.call('POST', '/v1/endpoints', {
      body: { url: `${receiver.url}/x`, headers: { 'Webhook-Id': 'a', 'content-type': 'b', Host: 'c', Connection: 'd', 'X-Split': 'a\r\nb: c', 'Bad Name': 'e' } },
    });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual([
      'headers.Webhook-Id', 'headers.content-type', 'headers.Host', 'headers.Connection', 'headers.X-Split', 'headers.Bad Name',
    ]);
    const tooMany = await tenant.call('POST', '/v1/endpoints', {
      body: { url: `${receiver.url}/x`, headers: Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])) },
    });
    expectError(tooMany, 400, 'validation_failed');
    expect(tooMany.body.error.details).toEqual([{ path: 'headers', message: 'at most 20 headers' }]);
  });

  it('stores values sealed, shows them masked, and PATCH replaces or clears the whole map', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/masked`, headers: { 'X-Api-Key': 'key-plaintext-1' } } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.headers).toEqual({ 'X-Api-Key': '••••' });
    const id = created.body.id as string;
    const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).first();
    expect(row.headers_enc).not.toContain('key-plaintext-1');
    expect(new SecretBox(t.config.secretsKey).open(row.headers_enc, id)).toBe('{"X-Api-Key":"key-plaintext-1"}');

    const got = await tenant.call('GET', `/v1/endpoints/${id}`);
    expect(got.body.headers).toEqual({ 'X-Api-Key': '••••' });
    expect(got.text).not.toContain('key-plaintext-1');

    const replaced = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { headers: { 'X-Other': 'other-plaintext-2' } } });
    expect(replaced.body.headers).toEqual({ 'X-Other': '••••' });
    const cleared = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { headers: null } });
    expect(cleared.body.headers).toEqual({});
    expect((await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).first()).headers_enc).toBeNull();
    const audit = await t.platform.db('audit_log').where({ target_id: id, action: 'endpoint.updated' });
    expect(audit).toHaveLength(2);
    expect(JSON.stringify(audit)).not.toMatch(/key-plaintext-1|other-plaintext-2/);
  });

  it('adds the headers to every attempt, after which the platform\'s own still hold', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', {
      body: { url: `${receiver.url}/with-headers`, eventTypes: ['headers.test'], headers: { 'X-Api-Key': 'k-123', Authorization: 'Bearer tok' } },
    });
    expect(created.status, created.text).toBe(201);
    const eventId = await publishRaw('headers.test', '{"n": 1}');
    const [req] = await eventually(async () => received('/with-headers').length > 0 && received('/with-headers'), 'the request arrived');
    expect(req!.headers).toMatchObject({
      'x-api-key': 'k-123',
      authorization: 'Bearer tok',
      'content-type': 'application/json',
      'webhook-id': eventId,
      'user-agent': 'webhook-relay/1.0',
    });
  });

  it('never lets a stored header replace or duplicate a platform one, whatever reached the database', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/forged`, eventTypes: ['forged.test'] } });
    const id = created.body.id as string;
    // Written past the API's check, as an older release or a manual fix might have left it.
    const forged = { 'Webhook-Id': 'evt_forged', 'CONTENT-TYPE': 'text/plain', 'webhook-signature': 'v1,forged', Host: 'evil.example', 'X-Kept': 'yes' };
    await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).update({ headers_enc: new SecretBox(t.config.secretsKey).seal(JSON.stringify(forged), id) });
    const eventId = await publishRaw('forged.test', '{}');
    const [req] = await eventually(async () => received('/forged').length > 0 && received('/forged'), 'the request arrived');
    expect(req!.headers['webhook-id']).toBe(eventId);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    expect(req!.headers['webhook-signature']).not.toContain('forged');
    expect(req!.headers.host).toBe(new URL(receiver.url).host);
    expect(req!.headers['x-kept']).toBe('yes');
  });
});

describe('content filters', () => {
  it('refuses a bad filter with the path of every bad operator or value', async () => {
    const res = await tenant.call('POST', '/v1/endpoints', {
      body: { url: `${receiver.url}/x`, filter: { 'data.amount': { $gtx: 5 }, 'data.country': { $in: 'VN' }, other: 1 } },
    });
    expectError(res, 400, 'validation_failed');
    expect(res.body.error.details.map((d: { path: string }) => d.path)).toEqual(['filter.data.amount.$gtx', 'filter.data.country.$in', 'filter.other']);
  });

  it('shows the filter as written, digits included, and null removes it', async () => {
    const created = await tenant.call('POST', '/v1/endpoints', raw(`{"url": "${receiver.url}/shown", "filter": {"data.amount": {"$gte": 12345678901234567890}}}`));
    expect(created.status, created.text).toBe(201);
    expect(created.text).toContain('"filter":{"data.amount": {"$gte": 12345678901234567890}}');
    const id = created.body.id as string;
    expect((await tenant.call('GET', `/v1/endpoints/${id}`)).text).toContain('12345678901234567890');
    const cleared = await tenant.call('PATCH', `/v1/endpoints/${id}`, { body: { filter: null } });
    expect(cleared.status).toBe(200);
    expect(cleared.body.filter).toBeNull();
    expect(await t.platform.db('endpoints').where({ id: uuidOf('endpoint', id) }).first('filter', 'filter_path')).toEqual({ filter: null, filter_path: null });
  });

  it('delivers only matching published events to a filtered endpoint, big integers compared exactly; an unfiltered one gets all', async () => {
    // A tenant of its own: the endpoints above without eventTypes take every type.
    const own = await t.createTenant('filters');
    const filtered = await own.call('POST', '/v1/endpoints', raw(`{"url": "${receiver.url}/filtered", "eventTypes": ["payment.*"],
      "filter": {"data.amount": {"$gt": 12345678901234567890}, "data.country": {"$in": ["VN", "TH"]}}}`));
    expect(filtered.status, filtered.text).toBe(201);
    const all = await own.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/unfiltered`, eventTypes: ['payment.*'] } });
    const [f, u] = [filtered.body.id as string, all.body.id as string];

    const events = {
      equal: await publishRaw('payment.made', '{"amount": 12345678901234567890, "country": "VN"}', own),
      above: await publishRaw('payment.made', '{"amount": 12345678901234567891, "country": "TH"}', own),
      otherCountry: await publishRaw('payment.made', '{"amount": 99999999999999999999, "country": "FR"}', own),
      missing: await publishRaw('payment.made', '{"country": "VN"}', own),
    };
    expect(await deliveredTo(events.above, own)).toEqual([f, u].sort());
    for (const id of [events.equal, events.otherCountry, events.missing]) expect(await deliveredTo(id, own)).toEqual([u]);

    await eventually(async () => received('/unfiltered').length === 4, 'the unfiltered endpoint received all four');
    await eventually(async () => received('/filtered').length === 1, 'the filtered endpoint received the match');
    expect(received('/filtered')[0]!.headers['webhook-id']).toBe(events.above);
    expect(received('/filtered')[0]!.body).toContain('"amount": 12345678901234567891');
  });

  it('filters accepted callbacks the same way (intake)', async () => {
    const own = await t.createTenant('intake-filters');
    const source: TestSource = await createSource(own, 'momo-automation');
    const created = await own.call('POST', '/v1/endpoints', raw(`{"url": "${receiver.url}/intake", "eventTypes": ["order.*"], "filter": {"data.total": {"$lte": -12345678901234567890.5}}}`));
    expect(created.status, created.text).toBe(201);
    const endpointId = created.body.id as string;
    const accept = async (total: string) => {
      const id = randomUUID();
      const body = `{"id":"${id}","event":"order.created","subject":{"id":"s_${id}","type":"order"},"actor":{"id":"u"},"subscription":{"id":"sub_1"},"data":{"total":${total}}}`;
      return expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, body)), 'accepted').eventId;
    };
    const match = await accept('-12345678901234567890.5');
    const miss = await accept('-12345678901234567890.4');
    expect(await deliveredTo(match, own)).toEqual([endpointId]);
    expect(await deliveredTo(miss, own)).toEqual([]);
    await eventually(async () => received('/intake').length === 1, 'the match arrived');
    expect(received('/intake')[0]!.headers['webhook-id']).toBe(match);
  });

  it('takes payloads holding NUL escapes, published and called back, and forwards them as written', async () => {
    // jsonb cannot hold U+0000; filters read such an escape as U+FFFD (db/functions/filter_document.sql).
    const own = await t.createTenant('nul-filters');
    const source: TestSource = await createSource(own, 'momo-automation');
    const created = await own.call('POST', '/v1/endpoints', raw(`{"url": "${receiver.url}/nul", "filter": {"data.kind": "nul"}}`));
    expect(created.status, created.text).toBe(201);
    const published = await publishRaw('thing.made', '{"kind": "nul", "raw": "a\\u0000b"}', own);
    const id = randomUUID();
    const body = `{"id":"${id}","event":"order.created","subject":{"id":"s_${id}","type":"order"},"actor":{"id":"u"},"subscription":{"id":"sub_1"},"data":{"kind":"nul","raw":"\\u0000"}}`;
    const called = expectOutcome(await postCallback(t, source.id, sign.automation(source.secret, body)), 'accepted').eventId;
    expect(await deliveredTo(published, own)).toEqual([created.body.id]);
    expect(await deliveredTo(called, own)).toEqual([created.body.id]);
    await eventually(async () => received('/nul').length === 2, 'both arrived');
    const byId = new Map(received('/nul').map((r) => [r.headers['webhook-id'], r.body]));
    expect(byId.get(published)).toContain('"raw": "a\\u0000b"');
    expect(byId.get(called)).toContain('"raw":"\\u0000"');
  });
});
