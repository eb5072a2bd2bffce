import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { RawJson, stringifyJson } from '../../src/domain/raw-json.js';
import { createEndpoint } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * An event written after release 0.3.0 stores its payload (`events.data`), not the envelope around
 * it; db/functions/event_body.sql builds the envelope. Releases up to 0.3.0 stored the whole
 * envelope, built in the api by stringifyJson, and endpoints dedupe and verify signatures over those
 * bytes: a body built must be the one those releases stored, byte for byte, and an event stored
 * whole is sent as stored.
 */

/** The body releases up to 0.3.0 stored for these columns (their outboundBody). */
function storedEnvelope(id: string, type: string, at: Date, messageId: string | null, data: string | null): string {
  return stringifyJson({ id, type, timestamp: at.toISOString(), messageId, data: data === null ? undefined : new RawJson(data) })!;
}

let t: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;

beforeAll(async () => {
  t = await startTestPlatform();
  tenant = await t.createTenant('event-body');
  receiver = await startReceiver();
  await createEndpoint(tenant, { url: `${receiver.url}/hook` });
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

/** An event as its rows name it: the uuid its TypeID encodes. */
const eventKey = (id: string) => uuidOf('event', id);

/**
 * One event given to publish_events as the api gives it (the tenant and the event as their uuids,
 * the event also by the TypeID its body names), to the tenant's endpoint: its outcome and the body
 * it answers.
 */
async function publishDirectly(eventId: string, fields: Record<string, unknown>): Promise<Array<{ outcome: string; body: string }>> {
  const item = {
    event_id: eventKey(eventId), envelope_id: eventId, delivery_ids: [uuidOf('delivery', newId('delivery'))], tenant_id: uuidOf('tenant', tenant.id), origin: 'api', type: 'order.created', message_id: null,
    idempotency_key: null, request_hash: null, trace_parent: null, ...fields,
  };
  const { rows } = await t.platform.db.raw<{ rows: Array<{ outcome: string; body: string }> }>('SELECT outcome, body FROM publish_events(?::jsonb, 86400)', [
    JSON.stringify([item]),
  ]);
  return rows;
}

/** The endpoint received exactly `body` for the event, and GET /v1/events/:id shows it as its payload. */
async function expectSentAndShown(eventId: string, body: string): Promise<void> {
  const arrived = await eventually(async () => receiver.requests.find((r) => r.headers['webhook-id'] === eventId), 'the event at its endpoint');
  expect(arrived.body).toBe(body);
  const shown = await tenant.call('GET', `/v1/events/${eventId}`);
  expect(shown.status, shown.text).toBe(200);
  expect(shown.text).toContain(`"payload":${body}`);
}

describe('the body of an event', () => {
  it('is built byte for byte as releases up to 0.3.0 stored it, whatever its message id, type, time and data', async () => {
    const messageIds = [
      null,
      'ord_1',
      'quote " backslash \\ slash / end',
      'controls \u0001\b\f\n\r\t\u001f and delete \u007f',
      'é中文😀 and separators \u2028\u2029',
    ];
    const types = ['order.created', 'a_b-c:d.E/f', 'type with "quotes" and é'];
    const times = [new Date('2026-12-04T00:00:00.000Z'), new Date('2026-01-31T23:59:59.999Z'), new Date('2000-02-29T12:00:00.007Z')];
    const payloads = [null, '{}', '{"id":12345678901234567890,"x":1.10}', ' [ 1 ,\n 2 ] ', '"\\u00e9\\ud83d\\ude00"', 'null'];
    const cases = messageIds.flatMap((messageId, i) =>
      types.map((type, j) => ({ id: newId('event'), type, at: times[(i + j) % times.length]!, messageId, data: payloads[(i * 3 + j) % payloads.length]! })),
    );
    const built = (db: Pick<typeof t.platform.db, 'raw'>) =>
      db.raw<{ rows: Array<{ body: string }> }>(
        `SELECT event_body(NULL, c.id, c.type, c.at, c.message_id, c.data) AS body
           FROM unnest(?::text[], ?::text[], ?::timestamptz[], ?::text[], ?::text[]) WITH ORDINALITY AS c(id, type, at, message_id, data, n)
          ORDER BY c.n`,
        [cases.map((c) => c.id), cases.map((c) => c.type), cases.map((c) => c.at.toISOString()), cases.map((c) => c.messageId) as string[], cases.map((c) => c.data) as string[]],
      );
    const { rows } = await built(t.platform.db);
    expect(rows.map((r) => r.body)).toEqual(cases.map((c) => storedEnvelope(c.id, c.type, c.at, c.messageId, c.data)));
    // The session's time zone changes nothing: timestamps are written in UTC.
    const elsewhere = await t.platform.db.transaction(async (trx) => {
      await trx.raw("SET LOCAL TimeZone = 'Pacific/Chatham'");
      return (await built(trx)).rows;
    });
    expect(elsewhere).toEqual(rows);
  });

  it('is not stored: a published event keeps its data as sent, and its endpoint receives the envelope built around it', async () => {
    const data = '{"amount": 10.50, "note": "ünïcode"}';
    const res = await tenant.call('POST', '/v1/events', {
      rawBody: `{"type":"order.created","messageId":"ord_9","data":${data}}`,
      headers: { 'content-type': 'application/json', 'idempotency-key': newId('event') },
    });
    expect(res.status, res.text).toBe(202);
    const eventId = res.body.id as string;
    expect(await t.platform.db('events').where({ id: eventKey(eventId) }).first('body', 'data')).toEqual({ body: null, data });
    // Built from what was sent and what the answer said, not from what was stored.
    await expectSentAndShown(eventId, storedEnvelope(eventId, 'order.created', new Date(res.body.createdAt as string), 'ord_9', data));
  });

  it('is built around the data of an event stored without its envelope, as publish_events stores an event given as data', async () => {
    const eventId = newId('event');
    const createdAt = new Date();
    const data = '{"amount": 12345678901234567890, "note":"\\u00fc"}';
    const expected = storedEnvelope(eventId, 'order.created', createdAt, 'ord_7', data);
    expect(await publishDirectly(eventId, { message_id: 'ord_7', data, created_at: createdAt.toISOString() })).toEqual([{ outcome: 'created', body: expected }]);
    expect(await t.platform.db('events').where({ id: eventKey(eventId) }).first('body', 'data')).toEqual({ body: null, data });
    await expectSentAndShown(eventId, expected);
  });

  it('is sent as stored for an event stored whole, and shown so by GET /v1/events/:id', async () => {
    // The api up to release 0.3.0 gives publish_events the whole envelope. Spaces that no builder
    // would write tell the stored bytes from rebuilt ones.
    const eventId = newId('event');
    const createdAt = new Date();
    const body = `{ "id": "${eventId}", "type": "order.created", "timestamp": "${createdAt.toISOString()}", "messageId": null, "data": {"n": 1.50} }`;
    expect(await publishDirectly(eventId, { body, created_at: createdAt.toISOString() })).toEqual([{ outcome: 'created', body }]);
    expect(await t.platform.db('events').where({ id: eventKey(eventId) }).first('body', 'data')).toEqual({ body, data: null });
    await expectSentAndShown(eventId, body);
  });
});
