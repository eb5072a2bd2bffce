import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settledDelivery } from '../helpers/dispatch.js';
import { createEndpoint, createSource, expectOutcome, postCallback, sign, SPEC_VECTOR, type Callback, type TestSource } from '../helpers/intake.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver, type ReceivedRequest } from '../helpers/receiver.js';
import { replayOne } from '../helpers/replay.js';

/**
 * A relay must not change what it carries: the `data` an endpoint receives is the very text the
 * sender wrote, through every inbound contract and POST /v1/events, in GET /v1/events/:id and on a
 * replay. Everything is compared as text, never parsed: a parsed comparison would let through the
 * corruption it is here to catch (JSON.parse turns 12345678901234567890 into 12345678901234567000,
 * 1e400 into Infinity and -0 into 0, and JSON.stringify writes those back as ...000, null and 0).
 */

const deep = (levels: number) => `${'{"n": ['.repeat(levels)}1.50${'] }'.repeat(levels)}`;

/** Raw JSON texts of `data`, each something a parse-and-reserialise relay would alter. */
const awkward: Array<[string, string]> = [
  ['integers beyond 2^53', '{"id":12345678901234567890,"neg":-9007199254740993,"max":18446744073709551615}'],
  ['negative zero', '{"a":-0,"b":-0.0,"c":[-0]}'],
  ['exponents', '{"huge":1e400,"tiny":1E-7,"signed":2.50e+10,"neg":-1e-400}'],
  ['long and trailing-zero decimals', '{"x":0.1000000000000000055511151231257827,"price":1.10,"amount":100.00}'],
  ['escaped and astral Unicode', '{"e":"\\u00e9","pair":"\\ud83d\\ude00","raw":"😀é","slash":"\\/","esc":"\\"\\\\\\b\\f\\n\\r\\t","lone":"\\udc00"}'],
  ['64 levels of nesting', deep(64)],
  ['empty containers', '{"o":{},"a":[],"s":"","nested":[{},[]]}'],
  ['integer-like keys out of order', '{"2":"two","1":"one","b":0,"10":"ten","a":0}'],
  ['whitespace as sent', '{ "a" :\t[ 1 ,\n  2 ] ,\r\n  "b" : { }  }'],
  ['a bare number as the whole payload', '12345678901234567890.000'],
];

let t: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;
const sources: Record<string, TestSource> = {};

beforeAll(async () => {
  t = await startTestPlatform();
  tenant = await t.createTenant('fidelity');
  receiver = await startReceiver();
  await createEndpoint(tenant, `${receiver.url}/hook`);
  sources['momo-communication'] = await createSource(tenant, 'momo-communication');
  sources['momo-automation'] = await createSource(tenant, 'momo-automation');
  sources['standard-webhooks'] = await createSource(tenant, 'standard-webhooks', SPEC_VECTOR.secret);
});
afterAll(async () => {
  await receiver?.close();
  await t?.stop();
});

async function deliveredFor(eventId: string): Promise<ReceivedRequest> {
  return eventually(async () => receiver.requests.find((r) => r.headers['webhook-id'] === eventId), `delivery of ${eventId}`);
}

/**
 * The text of `data` in a received envelope. The envelope around it is rebuilt from its parsed
 * fields (ids and types parse exactly), so this also holds the envelope to its documented shape.
 */
function dataText(body: string): string {
  const { id, type, timestamp, messageId } = JSON.parse(body) as Record<string, unknown>;
  const head = `{"id":${JSON.stringify(id)},"type":${JSON.stringify(type)},"timestamp":${JSON.stringify(timestamp)},"messageId":${JSON.stringify(messageId)},"data":`;
  expect(body.startsWith(head), `envelope head of ${body.slice(0, 200)}`).toBe(true);
  expect(body.endsWith('}')).toBe(true);
  return body.slice(head.length, -1);
}

/** Delivered `data` and the payload of GET /v1/events/:id are both exactly `expected`. */
async function expectForwardedAsSent(eventId: string, expected: string): Promise<ReceivedRequest> {
  const got = await deliveredFor(eventId);
  expect(dataText(got.body)).toBe(expected);
  const event = await tenant.call('GET', `/v1/events/${eventId}`);
  expect(event.status, event.text).toBe(200);
  expect(event.text).toContain(`"payload":${got.body}`);
  return got;
}

interface Contract {
  type: 'momo-communication' | 'momo-automation' | 'standard-webhooks';
  name: string;
  /** A signed callback carrying `payload`, and the text its forwarded `data` must be. */
  callback(secret: string, payload: string): { cb: Callback; data: string };
}

const contracts: Contract[] = [
  {
    type: 'momo-automation',
    name: 'momo-automation (data is the body\'s "data" member)',
    callback: (secret, payload) => ({ cb: sign.automation(secret, `{"id":"${randomUUID()}","event":"order.created","subscription":{"id":"sub_1"},"data": ${payload} }`), data: payload }),
  },
  {
    type: 'momo-communication',
    name: 'momo-communication (data is the whole body)',
    callback: (secret, payload) => {
      const body = `{"event":"order.created", "order_id":"o-${randomUUID()}","extra":${payload}}`;
      // Whitespace around the document is not part of it; everything inside is.
      return { cb: sign.communication(secret, ` \n${body}\r\n`), data: body };
    },
  },
  {
    type: 'standard-webhooks',
    name: 'standard-webhooks (data is the body\'s "data" member)',
    callback: (secret, payload) => ({ cb: sign.standard(secret, `{"type":"invoice.paid","data":\n${payload}\n}`), data: payload }),
  },
  {
    type: 'standard-webhooks',
    name: 'standard-webhooks without "data" (data is the whole body)',
    callback: (secret, payload) => {
      const body = `{"type":"invoice.paid","invoice":${payload}}`;
      return { cb: sign.standard(secret, body), data: body };
    },
  },
];

describe.each(contracts)('$name', (contract) => {
  it.each(awkward)('forwards %s exactly as received', async (_name, payload) => {
    const source = sources[contract.type]!;
    const { cb, data } = contract.callback(source.secret, payload);
    const { eventId } = expectOutcome(await postCallback(t, source.id, cb), 'accepted');
    await expectForwardedAsSent(eventId, data);
  });
});

describe('POST /v1/events', () => {
  const publishRaw = (body: string) => tenant.call('POST', '/v1/events', { rawBody: body, headers: { 'content-type': 'application/json' } });

  it.each(awkward)('forwards %s exactly as received', async (_name, payload) => {
    const res = await publishRaw(`{"type":"fidelity.checked", "data" :  ${payload} , "messageId":"msg-${randomUUID()}"}`);
    expect(res.status, res.text).toBe(202);
    await expectForwardedAsSent(res.body.id, payload);
  });

  it('finds data under an escaped member name, and takes the last of repeated names as JSON.parse does', async () => {
    const escaped = await publishRaw('{"type":"fidelity.checked","d\\u0061ta":{"n":1.10}}');
    expect(escaped.status, escaped.text).toBe(202);
    await expectForwardedAsSent(escaped.body.id, '{"n":1.10}');
    const repeated = await publishRaw('{"data":{"first":1.0},"type":"fidelity.checked","data":{"last":2.0}}');
    expect(repeated.status, repeated.text).toBe(202);
    await expectForwardedAsSent(repeated.body.id, '{"last":2.0}');
  });

  it('refuses a body that is not valid UTF-8 instead of forwarding replacement characters', async () => {
    const body = Buffer.concat([Buffer.from('{"type":"fidelity.checked","data":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const res = await tenant.call('POST', '/v1/events', { rawBody: body, headers: { 'content-type': 'application/json' } });
    expect(res.status, res.text).toBe(400);
    expect(res.body.error.code).toBe('malformed_json');
  });

  it('refuses a body in another Unicode encoding: only UTF-8 text can be forwarded as written', async () => {
    const body = Buffer.from('{"type":"fidelity.checked","data":{"n":1.10}}', 'utf16le');
    const res = await tenant.call('POST', '/v1/events', { rawBody: body, headers: { 'content-type': 'application/json; charset=utf-16le' } });
    expect(res.status, res.text).toBe(415);
    expect(res.body.error.code).toBe('unsupported_charset');
  });
});

describe('after acceptance', () => {
  it('a replay sends the very bytes of the first attempt', async () => {
    const payload = awkward[0]![1];
    const res = await tenant.call('POST', '/v1/events', { rawBody: `{"type":"fidelity.replayed","data":${payload}}`, headers: { 'content-type': 'application/json' } });
    expect(res.status, res.text).toBe(202);
    const first = await expectForwardedAsSent(res.body.id, payload);
    const delivery = await settledDelivery(tenant, res.body.id);
    expect(delivery.status).toBe('succeeded');
    expect((await replayOne(tenant, delivery.id)).status).toBe(202);
    const replayed = await eventually(
      async () => receiver.requests.find((r) => r.headers['webhook-id'] === res.body.id && r.headers['webhook-replay'] === 'true'),
      'the replayed request',
    );
    expect(replayed.body).toBe(first.body);
  });

  it('GET /v1/messages/:messageId shows each event\'s payload as stored', async () => {
    const messageId = `msg-${randomUUID()}`;
    const payload = awkward[2]![1];
    const res = await tenant.call('POST', '/v1/events', { rawBody: `{"type":"fidelity.timeline","messageId":"${messageId}","data":${payload}}`, headers: { 'content-type': 'application/json' } });
    expect(res.status, res.text).toBe(202);
    const got = await expectForwardedAsSent(res.body.id, payload);
    const timeline = await tenant.call('GET', `/v1/messages/${messageId}`);
    expect(timeline.status, timeline.text).toBe(200);
    expect(timeline.text).toContain(`"payload":${got.body}`);
  });
});
