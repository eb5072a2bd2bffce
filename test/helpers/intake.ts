import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { expect } from 'vitest';
import type { SourceType } from '../../src/domain/sources.js';
import type { ApiResponse } from './http.js';
import { request } from './http.js';
import type { TestPlatform, TestTenant } from './platform.js';
import { automation, communication, standard } from './providers.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

/** One signed (or deliberately mis-signed) callback, ready to POST to /inbound/:sourceId. */
export interface Callback {
  rawBody: string | Buffer;
  headers: Record<string, string>;
}

export interface TestSource {
  id: string;
  type: SourceType;
  secret: string;
}

/** The Standard Webhooks specification's published vector; its secret also serves the test sources. */
export const SPEC_VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

/** What an `hmac` source needs besides a secret when a test does not care how it is configured. */
export const PLAIN_HMAC_CONFIG = { header: 'X-Signature', algorithm: 'sha256', encoding: 'hex', signedContent: '{body}' };

export async function createSource(tenant: TestTenant, type: SourceType, secret?: string, hmac?: object): Promise<TestSource> {
  const config = hmac ?? (type === 'hmac' ? PLAIN_HMAC_CONFIG : undefined);
  const res = await tenant.call('POST', '/v1/sources', { body: { type, name: `${type} source`, ...(secret ? { secret } : {}), ...(config ? { hmac: config } : {}) } });
  expect(res.status, res.text).toBe(201);
  return { id: res.body.id, type, secret: secret ?? res.body.secret };
}

export async function createEndpoint(tenant: TestTenant, url: string, eventTypes?: string[]): Promise<string> {
  const res = await tenant.call('POST', '/v1/endpoints', { body: { url, ...(eventTypes ? { eventTypes } : {}) } });
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
}

export function postCallback(t: TestPlatform, sourceId: string, cb: Callback): Promise<ApiResponse> {
  return request(t.url, 'POST', `/inbound/${sourceId}`, { rawBody: cb.rawBody, headers: cb.headers });
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Signed callbacks per contract, with the knobs the tests turn. */
export const sign = {
  communication: (secret: string, body: string): Callback => ({ rawBody: body, headers: communication.headers(secret, body) }),
  automation: (secret: string, body: string, t = nowSeconds()): Callback => ({ rawBody: body, headers: automation.headers(secret, body, t) }),
  standard: (secret: string, body: string, id = `msg_${randomUUID()}`, t = nowSeconds()): Callback => ({
    rawBody: body,
    headers: standard.headers(secret, id, body, t),
  }),
};

/** The same bytes with one byte changed (a digit or letter inside the body, so it stays valid JSON). */
export function flipOneByte(body: string): string {
  const bytes = Buffer.from(body, 'utf8');
  const at = bytes.findLastIndex((b) => b >= 0x61 && b <= 0x7a); // a lower-case letter
  bytes[at] = bytes[at] === 0x7a ? 0x79 : bytes[at]! + 1;
  return bytes.toString('utf8');
}

export function withoutHeader(cb: Callback, name: string): Callback {
  const headers = { ...cb.headers };
  delete headers[name];
  return { ...cb, headers };
}

/** The contract's error shape, with a stable code: `{"error":{"code","message"}}` and nothing else. */
export function expectError(res: ApiResponse, status: number, code: string): void {
  expect({ status: res.status, body: res.body }, res.text).toEqual({
    status,
    body: { error: { code, message: expect.any(String) } },
  });
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
}

export function expectOutcome(res: ApiResponse, status: 'accepted' | 'duplicate' | 'stale'): { receiptId: string; eventId: string } {
  expect(res.status, res.text).toBe(200);
  expect(res.body).toEqual({ status, receiptId: expect.stringMatching(/^rcp_/), eventId: expect.stringMatching(/^evt_/) });
  return res.body;
}

export interface Stored {
  receipts: number;
  events: number;
  deliveries: number;
  messages: number;
}

/** What one source has left in the database: the rows a rejected callback must not add to. */
export async function storedFor(db: Knex, sourceId: string): Promise<Stored> {
  const { rows } = await db.raw<{ rows: Stored[] }>(
    `SELECT (SELECT count(*) FROM receipts WHERE source_id = :id)::int AS receipts,
            (SELECT count(*) FROM events WHERE source_id = :id)::int AS events,
            (SELECT count(*) FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.source_id = :id)::int AS deliveries,
            (SELECT count(*) FROM messages WHERE source_id = :id)::int AS messages`,
    { id: sourceId },
  );
  return rows[0]!;
}

export interface EventRows {
  event: { id: string; type: string; message_id: string | null; status: string | null; stale: boolean; source_id: string };
  receipts: Array<{ id: string; outcome: string }>;
  deliveries: Array<{ endpoint_id: string; status: string; dead_reason: string | null }>;
}

/** The rows of an event named by its TypeID, ids as the API names them. */
export async function rowsOfEvent(db: Knex, eventId: string): Promise<EventRows> {
  const key = uuidOf('event', eventId);
  const row = await db('events').where({ id: key }).first('id', 'type', 'message_id', 'status', 'stale', 'source_id');
  const event = row && { ...row, id: idOfUuid('event', row.id) };
  const receipts = await db('receipts').where({ event_id: key }).orderBy('received_at').select('id', 'outcome');
  const stored: EventRows['deliveries'] = await db('deliveries').where({ event_id: key }).orderBy('endpoint_id').select('endpoint_id', 'status', 'dead_reason');
  const deliveries = stored.map((d) => ({ ...d, endpoint_id: idOfUuid('endpoint', d.endpoint_id) }));
  return { event, receipts, deliveries };
}

// ---------------------------------------------------------------------------------------------
// /metrics, read as a user (Prometheus) would: text exposition, compared as deltas because the
// prom-client registry is shared by everything else in the test process.
// ---------------------------------------------------------------------------------------------

export type MetricSamples = Map<string, number>;

/** `name{a="x",b="y"}` with labels sorted, so lookups do not depend on exposition order. */
export function seriesKey(name: string, labels: Record<string, string> = {}): string {
  const parts = Object.keys(labels)
    .sort()
    .map((k) => `${k}="${labels[k]}"`);
  return parts.length ? `${name}{${parts.join(',')}}` : name;
}

export async function readMetrics(url: string): Promise<MetricSamples> {
  const res = await fetch(`${url}/metrics`);
  expect(res.status).toBe(200);
  const samples: MetricSamples = new Map();
  for (const line of (await res.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const [, k, v] of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[k!] = v!;
    samples.set(seriesKey(match[1]!, labels), Number(match[3]));
  }
  return samples;
}

export function sampleOf(samples: MetricSamples, name: string, labels: Record<string, string> = {}): number {
  return samples.get(seriesKey(name, labels)) ?? 0;
}

/** Sum over every series of `name` whose labels include `match`. */
export function sumOf(samples: MetricSamples, name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const [key, value] of samples) {
    if (!key.startsWith(`${name}{`) && key !== name) continue;
    if (Object.entries(match).every(([k, v]) => key.includes(`${k}="${v}"`))) total += value;
  }
  return total;
}

export const RECEIPTS = 'webhook_inbound_receipts_total';
export const ACK_COUNT = 'webhook_inbound_ack_seconds_count';

export function receiptsDelta(before: MetricSamples, after: MetricSamples, sourceType: SourceType, outcome: string): number {
  const labels = { source_type: sourceType, outcome };
  return sampleOf(after, RECEIPTS, labels) - sampleOf(before, RECEIPTS, labels);
}
