import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';
import { startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';

/**
 * Content filters evaluated where fan-out evaluates them: each filter is set on an endpoint through
 * the API (validated and compiled as a tenant's would be), and each event text is given to
 * fan_out_targets in PostgreSQL, which answers whether that endpoint is a target. Event data is
 * written as text, so big integers reach PostgreSQL digit for digit.
 */

interface Case {
  name: string;
  /** The filter as the tenant writes it (text, for numbers JSON.stringify would round). */
  filter: string;
  /** `type data-text` pairs that must match, and that must not. */
  matches: Array<[string, string]>;
  misses: Array<[string, string]>;
}

const big = '12345678901234567890';
const bigPlusOne = '12345678901234567891';

const cases: Case[] = [
  { name: '$eq on type', filter: '{"type": "invoice.paid"}', matches: [['invoice.paid', '{}']], misses: [['invoice.void', '{}'], ['invoice.paid.x', '{}']] },
  { name: '$eq big integer', filter: `{"data.amount": ${big}}`, matches: [['t', `{"amount": ${big}}`], ['t', `{"amount": ${big}.0}`]], misses: [['t', `{"amount": ${bigPlusOne}}`], ['t', '{"amount": 12345678901234567000}'], ['t', `{"amount": "${big}"}`]] },
  { name: '$gt big integer', filter: `{"data.amount": {"$gt": ${big}}}`, matches: [['t', `{"amount": ${bigPlusOne}}`], ['t', `{"amount": ${big}.0000001}`]], misses: [['t', `{"amount": ${big}}`], ['t', '{"amount": 1}'], ['t', '{}']] },
  { name: '$gte and $lt (a range)', filter: '{"data.amount": {"$gte": 100, "$lt": 200.5}}', matches: [['t', '{"amount": 100}'], ['t', '{"amount": 200.49}'], ['t', '{"amount": 1.5e2}']], misses: [['t', '{"amount": 99.999}'], ['t', '{"amount": 200.5}'], ['t', '{"amount": "150"}'], ['t', '{"amount": null}']] },
  { name: '$lte negative decimal', filter: '{"data.delta": {"$lte": -0.5}}', matches: [['t', '{"delta": -0.5}'], ['t', '{"delta": -12}']], misses: [['t', '{"delta": -0.49}'], ['t', '{"delta": 0}'], ['t', '{"delta": true}']] },
  { name: '$lt on strings', filter: '{"data.day": {"$lt": "2026-12-01"}}', matches: [['t', '{"day": "2026-11-30"}']], misses: [['t', '{"day": "2026-12-01"}'], ['t', '{"day": 20261130}']] },
  { name: '$neq (a missing field matches)', filter: '{"data.status": {"$neq": "void"}}', matches: [['t', '{"status": "paid"}'], ['t', '{}'], ['t', '{"status": null}'], ['t', '{"status": 5}']], misses: [['t', '{"status": "void"}'], ['t', '{"status": ["paid", "void"]}']] },
  { name: '$in', filter: '{"data.country": {"$in": ["VN", "TH", 7]}}', matches: [['t', '{"country": "VN"}'], ['t', '{"country": 7}'], ['t', '{"country": ["FR", "TH"]}']], misses: [['t', '{"country": "vn"}'], ['t', '{"country": "7"}'], ['t', '{}']] },
  { name: '$nin', filter: '{"data.country": {"$nin": ["VN", "TH"]}}', matches: [['t', '{"country": "FR"}'], ['t', '{}']], misses: [['t', '{"country": "TH"}']] },
  { name: '$exists true (null counts)', filter: '{"data.refund": {"$exists": true}}', matches: [['t', '{"refund": null}'], ['t', '{"refund": {"a": 1}}'], ['t', '{"refund": false}']], misses: [['t', '{}'], ['t', '{"refunds": 1}']] },
  { name: '$exists false', filter: '{"data.refund": {"$exists": false}}', matches: [['t', '{}']], misses: [['t', '{"refund": null}']] },
  { name: '$startsWith (strings only)', filter: '{"data.sku": {"$startsWith": "AB\\"\\\\"}}', matches: [['t', '{"sku": "AB\\"\\\\-1"}']], misses: [['t', '{"sku": "AB-1"}'], ['t', '{"sku": 12}'], ['t', '{}']] },
  { name: 'quotes, backslashes and unicode', filter: '{"data.name": "Nguy\\u1ec5n \\"Bé\\" \\\\ 😀"}', matches: [['t', '{"name": "Nguyễn \\"Bé\\" \\\\ \\ud83d\\ude00"}']], misses: [['t', '{"name": "Nguyen \\"Be\\" \\\\ 😀"}']] },
  { name: 'a key with a dot-free special name', filter: '{"data.a b.$c\\"d": true}', matches: [['t', '{"a b": {"$c\\"d": true}}']], misses: [['t', '{"a b": {"$c\\"d": "true"}}'], ['t', '{"a b": {"$c\\"d": 1}}']] },
  { name: 'nested path through an array', filter: '{"data.items.sku": "X"}', matches: [['t', '{"items": [{"sku": "Y"}, {"sku": "X"}]}'], ['t', '{"items": {"sku": "X"}}']], misses: [['t', '{"items": [{"sku": "Y"}]}'], ['t', '{"items": []}']] },
  { name: 'null and booleans', filter: '{"data.a": null, "data.b": false}', matches: [['t', '{"a": null, "b": false}']], misses: [['t', '{"b": false}'], ['t', '{"a": null, "b": 0}'], ['t', '{"a": "null", "b": false}']] },
  { name: 'type mismatch never matches', filter: '{"data.n": {"$gt": "5"}}', matches: [['t', '{"n": "6"}']], misses: [['t', '{"n": 6}']] },
  { name: '$and / $or', filter: '{"$or": [{"type": "a"}, {"$and": [{"type": "b"}, {"data.x": {"$gte": 10}}]}]}', matches: [['a', '{}'], ['b', '{"x": 10}']], misses: [['b', '{"x": 9}'], ['c', '{"x": 11}']] },
  { name: 'data that is not an object', filter: '{"data.a": 1}', matches: [], misses: [['t', '[1, 2]'], ['t', '"text"'], ['t', 'null']] },
  // jsonb refuses a NUL escape and a lone surrogate: each reads as U+FFFD (filter_document), not as a failed publish.
  { name: 'NUL escapes in the payload', filter: '{"data.kind": "x"}', matches: [['t', '{"kind": "x", "raw": "a\\u0000b"}'], ['t', '{"raw": ["\\u0000\\u0000"], "kind": "x"}']], misses: [['t', '{"kind": "y", "raw": "\\u0000"}']] },
  { name: 'a NUL escape read as U+FFFD, an escaped backslash before u0000 kept', filter: '{"data.raw": {"$startsWith": "\\\\u0000"}}', matches: [['t', '{"raw": "\\\\u0000z"}']], misses: [['t', '{"raw": "\\u0000z"}'], ['t', '{"raw": "\\ufffdz"}']] },
  { name: 'a NUL or a lone surrogate read as U+FFFD', filter: '{"data.raw": "a\\ufffdb"}', matches: [['t', '{"raw": "a\\u0000b"}'], ['t', '{"raw": "a\\ud800b"}'], ['t', '{"raw": "a\\udfffb"}']], misses: [['t', '{"raw": "ab"}']] },
  { name: 'a surrogate pair kept beside a lone one', filter: '{"data.raw": "\\ud83d\\ude00\\ufffd"}', matches: [['t', '{"raw": "\\ud83d\\ude00\\udc00"}'], ['t', '{"raw": "😀\\ud83d"}']], misses: [['t', '{"raw": "\\ufffd\\ufffd\\ufffd"}']] },
];

let t: TestPlatform;
let tenant: TestTenant;
const endpointOf = new Map<string, string>();

beforeAll(async () => {
  t = await startTestPlatform({ role: 'api' });
  tenant = await t.createTenant('filter-evaluation');
  for (const c of cases) {
    // Raw text, so the filter's numbers reach the server as written.
    const res = await tenant.call('POST', '/v1/endpoints', {
      rawBody: `{"url": "http://127.0.0.1:9/${endpointOf.size}", "filter": ${c.filter}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status, `${c.name}: ${res.text}`).toBe(201);
    endpointOf.set(c.name, res.body.id);
  }
});
afterAll(async () => {
  await t?.stop();
});

/** The endpoints fan-out picks for an event of this type and data, as intake and publishing ask it. */
async function targets(type: string, data: string): Promise<string[]> {
  const body = `{"id":"evt_x","type":${JSON.stringify(type)},"timestamp":"2026-12-02T00:00:00.000Z","messageId":null,"data":${data}}`;
  // fan_out_targets takes the tenant as its stored uuid's text.
  const { rows } = await t.platform.db.raw<{ rows: Array<{ endpoint_id: string }> }>(
    'SELECT (unnest(fan_out_targets(:tenantId, :type, :body))).endpoint_id',
    { tenantId: uuidOf('tenant', tenant.id), type, body },
  );
  return rows.map((r) => idOfUuid('endpoint', r.endpoint_id));
}

describe('content filters in fan-out', () => {
  it.each(cases)('$name', async (c) => {
    const id = endpointOf.get(c.name)!;
    for (const [type, data] of c.matches) expect(await targets(type, data), `${c.filter} should match ${type} ${data}`).toContain(id);
    for (const [type, data] of c.misses) expect(await targets(type, data), `${c.filter} should not match ${type} ${data}`).not.toContain(id);
  });

  it('the signature of release 0.1.0 applies no filter', async () => {
    const { rows } = await t.platform.db.raw<{ rows: Array<{ endpoint_id: string }> }>(
      'SELECT (unnest(fan_out_targets(:tenantId, :type))).endpoint_id',
      { tenantId: uuidOf('tenant', tenant.id), type: 't' },
    );
    expect(rows.map((r) => idOfUuid('endpoint', r.endpoint_id))).toContain(endpointOf.get('$eq big integer'));
  });
});
