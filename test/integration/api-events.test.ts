import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { expectError, listAll, publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { standard } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

describe('events API', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  /** The tenant as its rows name it: the uuid its TypeID encodes. */
  let tenantKey: string;
  let receiver: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    receiver = await startReceiver();
    tenant = await t.createTenant('events');
    tenantKey = uuidOf('tenant', tenant.id);
    // Two endpoints that both take order.* events, one that never matches them.
    for (const eventTypes of [[], ['order.*'], ['invoice.paid']]) {
      const res = await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/${eventTypes.join(',')}`, eventTypes } });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  const db = () => t.platform.db;
  /** An event as its rows name it: the uuid its TypeID encodes. */
  const eventKey = (id: string) => uuidOf('event', id);
  const count = async (table: string, where: Record<string, unknown>) => Number((await db()(table).where(where).count({ n: '*' }))[0]!.n);
  const post = (body: unknown, key?: string, who: TestTenant = tenant) =>
    who.call('POST', '/v1/events', { body, headers: key === undefined ? {} : { 'idempotency-key': key } });

  it('publishes with an Idempotency-Key: 202, then the same request again is 200 with the same event and no new work', async () => {
    const body = { type: 'order.created', messageId: 'ord-1', data: { orderId: 'ord-1', total: 12.5, lines: [1, 2] } };
    const first = await post(body, 'key-1');
    expect(first.status).toBe(202);
    expect(first.body).toMatchObject({ id: expect.stringMatching(/^evt_[0-9a-z]{26}$/), type: 'order.created', messageId: 'ord-1', origin: 'api', duplicate: false });
    expect(await count('deliveries', { event_id: eventKey(first.body.id) })).toBe(2);

    // Both matching endpoints receive it once.
    await eventually(async () => receiver.requests.filter((r) => r.headers['webhook-id'] === first.body.id).length === 2, 'two deliveries');

    const eventsBefore = await count('events', { tenant_id: tenantKey });
    const deliveriesBefore = await count('deliveries', { tenant_id: tenantKey });
    const again = await post(body, 'key-1');
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id: first.body.id, duplicate: true });
    // Object key order does not make a different request.
    const reordered = await post({ data: { lines: [1, 2], total: 12.5, orderId: 'ord-1' }, messageId: 'ord-1', type: 'order.created' }, 'key-1');
    expect(reordered.status).toBe(200);
    expect(reordered.body.id).toBe(first.body.id);
    expect(await count('events', { tenant_id: tenantKey })).toBe(eventsBefore);
    expect(await count('deliveries', { tenant_id: tenantKey })).toBe(deliveriesBefore);
    expect(await count('deliveries', { event_id: eventKey(first.body.id) })).toBe(2);

    // The repeat sent nothing: once both deliveries are settled, the receiver still has two requests for the event.
    await eventually(async () => (await count('deliveries', { event_id: eventKey(first.body.id), status: 'succeeded' })) === 2, 'deliveries settled');
    expect(receiver.requests.filter((r) => r.headers['webhook-id'] === first.body.id)).toHaveLength(2);
  });

  it('refuses to reuse an Idempotency-Key for a different request with 409, storing nothing', async () => {
    const first = await post({ type: 'order.created', data: { n: 1 } }, 'key-2');
    expect(first.status).toBe(202);
    const before = await count('events', { tenant_id: tenantKey });
    for (const changed of [{ type: 'order.created', data: { n: 2 } }, { type: 'order.updated', data: { n: 1 } }, { type: 'order.created', messageId: 'm', data: { n: 1 } }]) {
      expectError(await post(changed, 'key-2'), 409, 'idempotency_key_reused');
    }
    expect(await count('events', { tenant_id: tenantKey })).toBe(before);
  });

  it('scopes Idempotency-Keys to the tenant', async () => {
    const other = await t.createTenant('other');
    const mine = await post({ type: 'order.created', data: {} }, 'shared-key');
    const theirs = await post({ type: 'order.created', data: {} }, 'shared-key', other);
    expect([mine.status, theirs.status]).toEqual([202, 202]);
    expect(theirs.body.id).not.toBe(mine.body.id);
  });

  it('without an Idempotency-Key every request is a new event', async () => {
    const body = { type: 'invoice.paid', data: { invoice: 'inv-1' } };
    const a = await post(body);
    const b = await post(body);
    expect([a.status, b.status]).toEqual([202, 202]);
    expect(a.body.id).not.toBe(b.body.id);
    expect(await count('deliveries', { event_id: eventKey(a.body.id) })).toBe(2); // the all-types and the invoice.paid endpoint
    expect(await count('deliveries', { event_id: eventKey(b.body.id) })).toBe(2);
    // The request's hash is kept only to compare a repeated key with: these events carry none.
    const hashes = await db()('events').whereIn('id', [eventKey(a.body.id), eventKey(b.body.id)]).pluck('request_hash');
    expect(hashes).toEqual([null, null]);
    const keyed = await post(body, 'key-hash');
    expect(await db()('events').where('id', eventKey(keyed.body.id)).first('request_hash')).toEqual({ request_hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
  });

  it('validates the request: malformed JSON, bad type, missing data, bad key, oversized body', async () => {
    const before = await count('events', { tenant_id: tenantKey });
    const raw = (rawBody: string | Buffer, headers: Record<string, string> = {}) =>
      tenant.call('POST', '/v1/events', { rawBody, headers: { 'content-type': 'application/json', ...headers } });
    expectError(await raw('{"type":"order.created","data":'), 400, 'malformed_json');
    expectError(await post({ type: 'bad type!', data: {} }), 400, 'validation_failed');
    expectError(await post({ type: 'order.created' }), 400, 'validation_failed');
    expectError(await post({ type: 'order.created', data: {}, extra: 1 }), 400, 'validation_failed');
    const longKey = await post({ type: 'order.created', data: {} }, 'k'.repeat(256));
    expectError(longKey, 400, 'validation_failed');
    expect(longKey.body.error.details).toEqual([{ path: 'Idempotency-Key', message: expect.stringMatching(/255/) }]);
    const reserved = await post({ type: 'order.created', data: {} }, 'platform.x');
    expect(reserved.body.error.details).toEqual([{ path: 'Idempotency-Key', message: 'must not start with "platform."' }]);

    const big = JSON.stringify({ type: 'order.created', data: { blob: 'x'.repeat(1024 * 1024) } });
    expectError(await raw(big), 413, 'payload_too_large');
    expect(await count('events', { tenant_id: tenantKey })).toBe(before);
  });

  it('accepts a body just under 1 MiB', async () => {
    const body = JSON.stringify({ type: 'bulk.import', data: { blob: 'x'.repeat(1024 * 1024 - 200) } });
    expect(Buffer.byteLength(body)).toBeLessThanOrEqual(1024 * 1024);
    const res = await tenant.call('POST', '/v1/events', { rawBody: body, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
  });

  it('20 concurrent requests with one Idempotency-Key make one event: one 202, the rest 200 with its id', async () => {
    const body = { type: 'order.created', data: { race: true } };
    const answers = await Promise.all(Array.from({ length: 20 }, () => post(body, 'race-key')));
    expect(answers.map((a) => a.status).sort()).toEqual([...Array(19).fill(200), 202]);
    expect(new Set(answers.map((a) => a.body.id)).size).toBe(1);
    expect(await count('events', { tenant_id: tenantKey, idempotency_key: 'race-key' })).toBe(1);
    expect(await count('deliveries', { event_id: eventKey(answers[0]!.body.id) })).toBe(2);
  });

  it('publishes arriving together share a commit: each event is its own tenant\'s, its data arrives exactly as sent', async () => {
    const other = await t.createTenant('events-other');
    const otherEndpoint = await other.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/other`, eventTypes: [] } });
    expect(otherEndpoint.status).toBe(201);
    // Digits, escapes and non-ASCII as a client writes them: forwarded as written, not re-serialised.
    const raw = (n: number) => String.raw`{"type":"batch.check","data":{"n":${n},"price":1.50,"big":12345678901234567890,"text":"caf\u00e9 \\ \"q\" ☃ \ud83d\ude00","nested":{"a":[1,2.0e3]}}}`;
    const sends = Array.from({ length: 40 }, (_, n) =>
      (n % 2 === 0 ? tenant : other).call('POST', '/v1/events', { rawBody: raw(n), headers: { 'content-type': 'application/json' } }),
    );
    const answers = await Promise.all(sends);
    expect(answers.map((a) => a.status)).toEqual(Array(40).fill(202));
    const owners = await db()('events').whereIn('id', answers.map((a) => eventKey(a.body.id))).select('id', 'tenant_id');
    // Each row names itself and its tenant by uuid; compared as the API names them.
    const ownerOf = new Map(owners.map((r: { id: string; tenant_id: string }) => [idOfUuid('event', r.id), idOfUuid('tenant', r.tenant_id)]));
    answers.forEach((a, n) => expect(ownerOf.get(a.body.id)).toBe(n % 2 === 0 ? tenant.id : other.id));
    // Each event reaches its own tenant's endpoint only (one takes every type on each side), with
    // the data exactly as it was sent.
    const ids = new Set(answers.map((a) => a.body.id as string));
    await eventually(async () => receiver.requests.filter((r) => ids.has(r.headers['webhook-id'] as string)).length === 40, 'every delivery');
    answers.forEach((a, n) => {
      const got = receiver.requests.filter((r) => r.headers['webhook-id'] === a.body.id);
      expect(got.map((r) => r.path === '/other')).toEqual([n % 2 !== 0]);
      expect(got[0]!.body).toContain(`"data":${raw(n).slice(raw(n).indexOf('"data":') + 7, -1)}}`);
    });
  });

  it('lists events newest first with type, messageId, since/until filters and cursor pagination', async () => {
    const lister = await t.createTenant('lister');
    const early = [
      await publish(lister, { type: 'order.created', messageId: 'm-1' }),
      await publish(lister, { type: 'order.paid', messageId: 'm-1' }),
      await publish(lister, { type: 'invoice.sent', messageId: 'm-2' }),
    ];
    // A boundary strictly after every early event and not after any later one.
    const lastEarly = new Date((await lister.call('GET', `/v1/events/${early[2]}`)).body.createdAt).getTime();
    const boundary = new Date(lastEarly + 1);
    while (Date.now() < boundary.getTime() + 1) await new Promise((r) => setImmediate(r));
    const late = [
      await publish(lister, { type: 'order.created', messageId: 'm-2' }),
      await publish(lister, { type: 'order.created' }),
    ];
    const all = [...early, ...late].reverse();
    const ids = async (query: string) => (await listAll(lister, `/v1/events${query}`, 2)).items.map((e) => e.id as string);

    const { items, pages } = await listAll(lister, '/v1/events', 2);
    expect(pages).toBe(3);
    expect(items.map((e) => e.id)).toEqual(all);
    expect(items[0]).toMatchObject({ type: 'order.created', messageId: null, origin: 'api', sourceId: null });

    expect(await ids('?type=order.created')).toEqual([late[1], late[0], early[0]]);
    expect(await ids('?messageId=m-2')).toEqual([late[0], early[2]]);
    expect(await ids('?type=order.created&messageId=m-1')).toEqual([early[0]]);
    expect(await ids(`?since=${boundary.toISOString()}`)).toEqual([late[1], late[0]]);
    expect(await ids(`?until=${boundary.toISOString()}`)).toEqual([early[2], early[1], early[0]]);
    expect(await ids(`?since=${encodeURIComponent(new Date(0).toISOString().replace('Z', '+00:00'))}&until=${boundary.toISOString()}&type=order.paid`)).toEqual([early[1]]);
    expect(await ids('?type=nothing.like.this')).toEqual([]);
    expectError(await lister.call('GET', '/v1/events?since=yesterday'), 400, 'validation_failed');
    expectError(await lister.call('GET', '/v1/events?limit=501'), 400, 'validation_failed');
  });

  it('GET /v1/events/:id shows the payload, the receipt count and every delivery with its status', async () => {
    const published = await publish(tenant, { type: 'order.shipped', messageId: 'ord-9', data: { carrier: 'dhl' } });
    const detail = await eventually(async () => {
      const res = await tenant.call('GET', `/v1/events/${published}`);
      return res.body.deliveries?.every((d: { status: string }) => d.status === 'succeeded') && res;
    }, 'deliveries succeeded');
    expect(detail.status).toBe(200);
    expect(detail.body).toMatchObject({
      id: published,
      type: 'order.shipped',
      messageId: 'ord-9',
      origin: 'api',
      receiptCount: 0,
      payload: { id: published, type: 'order.shipped', messageId: 'ord-9', data: { carrier: 'dhl' } },
    });
    expect(detail.body.deliveries).toHaveLength(2);
    for (const d of detail.body.deliveries) {
      expect(d).toMatchObject({ id: expect.stringMatching(/^dlv_/), endpointId: expect.stringMatching(/^ep_/), status: 'succeeded', attemptCount: 1, lastStatusCode: 200 });
    }

    // A callback delivered twice by its provider: one event, two receipts.
    const source = await tenant.call('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'sw' } });
    const body = JSON.stringify({ type: 'order.refunded', data: { orderId: 'ord-9' } });
    const send = () => t.call('POST', `/inbound/${source.body.id}`, { rawBody: body, headers: standard.headers(source.body.secret, 'msg_1', body) });
    const first = await send();
    const second = await send();
    expect([first.body.status, second.body.status]).toEqual(['accepted', 'duplicate']);
    const callbackEvent = await tenant.call('GET', `/v1/events/${first.body.eventId}`);
    expect(callbackEvent.body).toMatchObject({ id: first.body.eventId, origin: 'callback', sourceId: source.body.id, receiptCount: 2 });
    expect(callbackEvent.body.deliveries).toHaveLength(2);

    expectError(await tenant.call('GET', '/v1/events/evt_01h455vb4pex5vsknk084sn02q'), 404, 'not_found');
  });

  it('answers an id that is no event TypeID as an unknown one: 404, nothing for a filter, 400 for a cursor', async () => {
    const published = await publish(tenant, { type: 'order.filtered' });
    // Stored as the uuid a TypeID encodes, each of these would fail to convert: none may become a 500.
    const malformed = ['evt_8zzzzzzzzzzzzzzzzzzzzzzzzz', published.toUpperCase(), 'evt_nope', `ep_${published.slice('evt_'.length)}`, 'x'.repeat(100)];
    for (const id of malformed) {
      expect({ id, status: (await tenant.call('GET', `/v1/events/${id}`)).status }).toEqual({ id, status: 404 });
      const filtered = await tenant.call('GET', `/v1/deliveries?eventId=${encodeURIComponent(id)}`);
      expect({ id, status: filtered.status, data: filtered.body.data }).toEqual({ id, status: 200, data: [] });
    }
    expect((await tenant.call('GET', `/v1/deliveries?eventId=${published}`)).body.data).toHaveLength(2);
    // A page cursor carries the last id seen: another kind's is no event's.
    const foreign = Buffer.from(`ep_${published.slice('evt_'.length)}`).toString('base64url');
    expectError(await tenant.call('GET', `/v1/events?cursor=${foreign}`), 400, 'invalid_cursor');
  });
});
