// Traffic that makes every logging code path of the platform run, for the log-redaction tests:
// auth failures, signature failures, receivers answering 5xx (with the signature echoed back),
// refused connections, dead letters, replays, reconciliation against a failing provider, and a
// storage outage (the PostgreSQL connection cut at a TCP proxy) across intake, the tenant API,
// the admin API, dispatch sweeps and reconciliation. It records every secret, key, token and
// signature value it creates or sends, so the caller can assert none of them reached the logs.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { expect } from 'vitest';
import { hmacSha256Hex, signStandardWebhook } from '../../src/domain/signing.js';
import { closedPort } from '../helpers/dispatch.js';
import { request, type ApiResponse, type RequestOptions } from '../helpers/http.js';
import { eventually } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';
import { idOfUuid, uuidOf } from '../../src/domain/ids.js';

/** Environment the platform under test needs for this traffic to finish quickly. */
export const trafficEnv = {
  RECONCILE_INTERVAL_SECONDS: '1',
  SWEEP_INTERVAL_MS: '200',
  // The failing receivers would open their circuits (a 30 s pause) long before the traffic ends.
  CIRCUIT_FAILURE_THRESHOLD: '1000',
};

export interface TrafficTarget {
  url: string;
  adminToken: string;
  /** A direct connection to the platform's database (not through the proxy), for setup and waiting. */
  db: Knex;
  /** Refuse every PostgreSQL connection (open ones drop). */
  cutStorage(): void;
  /** Accept PostgreSQL connections but never answer (open ones go silent). */
  hangStorage(): void;
  restoreStorage(): void;
  /** Everything logged so far. */
  logs(): string;
}

export interface Traffic {
  /** label → a value that must never appear in any log line. */
  secrets: Map<string, string>;
  close(): Promise<void>;
}

/** The forms a secret could be logged in: as is, and for whsec_ secrets the key inside it. */
export function secretForms(value: string): string[] {
  const forms = [value];
  if (value.startsWith('whsec_')) forms.push(value.slice('whsec_'.length));
  if (value.startsWith('v1,')) forms.push(value.slice(3));
  if (value.startsWith('Bearer ')) forms.push(value.slice('Bearer '.length));
  return forms.filter((f) => f.length >= 16); // shorter strings would match by accident
}

export async function driveLoggedTraffic(target: TrafficTarget): Promise<Traffic> {
  const secrets = new Map<string, string>();
  const keep = (label: string, value: string) => {
    expect(value, label).toBeTruthy();
    secrets.set(`${label} #${secrets.size}`, value);
    return value;
  };
  const call = (method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse> => {
    if (opts.token) keep('Authorization header sent', `Bearer ${opts.token}`);
    if (opts.headers?.authorization) keep('Authorization header sent', opts.headers.authorization);
    return request(target.url, method, path, opts);
  };
  const inbound = (sourceId: string, body: string, headers: Record<string, string>) => {
    for (const name of ['x-signature', 'x-momo-signature', 'webhook-signature']) {
      if (headers[name]) keep(`${name} sent`, headers[name]);
    }
    const v1 = /v1=([0-9a-f]{64})/.exec(headers['x-momo-signature'] ?? '');
    if (v1) keep('x-momo-signature v1 sent', v1[1]!);
    return call('POST', `/inbound/${sourceId}`, { rawBody: body, headers: { 'content-type': 'application/json', ...headers } });
  };
  const now = () => Math.floor(Date.now() / 1000);

  // Receivers that answer with the very headers they were sent, so a logged response body would
  // carry the outbound webhook-signature (and the provider one the reconciliation API key).
  const echo = (status: number) => (req: { headers: Record<string, unknown> }, res: import('node:http').ServerResponse) => {
    res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ youSent: req.headers }));
  };
  const receivers: Receiver[] = [];
  const receiver = async (status: number) => {
    const r = await startReceiver(echo(status) as never);
    receivers.push(r);
    return r;
  };
  const ok = await receiver(200);
  const failing = await receiver(500);
  const gone = await receiver(410);
  const provider = await receiver(500);
  const refusedPort = await closedPort();

  // --- tenants and auth failures ----------------------------------------------------------------
  const tenantA = await call('POST', '/admin/tenants', { token: target.adminToken, body: { name: 'log-a' } });
  expect(tenantA.status).toBe(201);
  const keyA = keep('API key', tenantA.body.apiKey);
  const tenantB = await call('POST', '/admin/tenants', { token: target.adminToken, body: { name: 'log-b' } });
  const keyB = keep('API key', tenantB.body.apiKey);
  keep('admin token', target.adminToken);
  for (const token of [`wrong-admin-token-${randomBytes(16).toString('hex')}`, keyA, `${target.adminToken}x`]) {
    expect((await call('POST', '/admin/tenants', { token, body: { name: 'nope' } })).status).toBe(401);
  }
  for (const token of [`sk_${randomBytes(32).toString('base64url')}`, target.adminToken, `${keyA}x`, `not-a-key-${randomBytes(16).toString('hex')}`]) {
    expect((await call('GET', '/v1/endpoints', { token })).status).toBe(401);
  }
  expect((await call('GET', '/v1/endpoints', { headers: { authorization: `Basic ${Buffer.from(`user:${keyB}`).toString('base64')}` } })).status).toBe(401);
  const a = (method: string, path: string, opts: RequestOptions = {}) => call(method, path, { ...opts, token: keyA });

  // --- sources ----------------------------------------------------------------------------------
  const commSecret = keep('source secret', `comm-${randomBytes(16).toString('hex')}`);
  const autoSecret = keep('source secret', `auto-${randomBytes(16).toString('hex')}`);
  const stdSecret = keep('source secret', `whsec_${randomBytes(32).toString('base64')}`);
  const reconcileKey = keep('reconcile API key', `prov-${randomBytes(16).toString('hex')}`);
  const comm = await a('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'c', secret: commSecret, reconcile: { baseUrl: provider.url, apiKey: reconcileKey, afterSeconds: 10 } } });
  const auto = await a('POST', '/v1/sources', { body: { type: 'momo-automation', name: 'a', secret: autoSecret } });
  const std = await a('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 's', secret: stdSecret } });
  const generated = await a('POST', '/v1/sources', { body: { type: 'standard-webhooks', name: 'g' } });
  expect([comm.status, auto.status, std.status, generated.status]).toEqual([201, 201, 201, 201]);
  const genSecret = keep('generated source secret', generated.body.secret);
  // A source the cut below finds uncached: its first lookup happens during the outage.
  const late = await a('POST', '/v1/sources', { body: { type: 'momo-communication', name: 'late', secret: commSecret } });

  // --- endpoints --------------------------------------------------------------------------------
  const endpoint = async (url: string, extra: Record<string, unknown> = {}) => {
    const res = await a('POST', '/v1/endpoints', { body: { url, ...extra } });
    expect(res.status, res.text).toBe(201);
    keep('endpoint secret', res.body.secret);
    return res.body.id as string;
  };
  const okId = await endpoint(`${ok.url}/ok`);
  const failingId = await endpoint(`${failing.url}/fail`, { retryPolicy: { maxAttempts: 2 } });
  await endpoint(`http://127.0.0.1:${refusedPort}/refused`, { retryPolicy: { maxAttempts: 2 } });
  await endpoint(`${gone.url}/gone`);
  const rotated = await a('POST', `/v1/endpoints/${okId}/secret/rotate`);
  expect(rotated.status).toBe(200);
  keep('rotated endpoint secret', rotated.body.secret);

  // --- callbacks: accepted, duplicate, every kind of rejection -----------------------------------
  const commBody = JSON.stringify({ event: 'message.status', message_id: 'm-rec', status: 'sent', timestamp: new Date().toISOString() });
  const commHeaders = { 'x-signature': hmacSha256Hex(commSecret, commBody) };
  expect((await inbound(comm.body.id, commBody, commHeaders)).status).toBe(200);
  expect((await inbound(comm.body.id, commBody, commHeaders)).status).toBe(200); // duplicate
  // The right secret over other bytes, a wrong secret, garbage, nothing.
  expect((await inbound(comm.body.id, `${commBody} `, commHeaders)).status).toBe(401);
  expect((await inbound(comm.body.id, commBody, { 'x-signature': hmacSha256Hex(`${commSecret}x`, commBody) })).status).toBe(401);
  expect((await inbound(comm.body.id, commBody, {})).status).toBe(401);
  const malformed = '{"event":';
  expect((await inbound(comm.body.id, malformed, { 'x-signature': hmacSha256Hex(commSecret, malformed) })).status).toBe(400);

  const autoSign = (body: string, t = now()) => ({ 'x-momo-signature': `t=${t},v1=${hmacSha256Hex(autoSecret, `${t}.${body}`)}` });
  const autoBody = JSON.stringify({ id: randomUUID(), event: 'order.created', subscription: { id: 'sub_1' }, data: { n: 1 } });
  expect((await inbound(auto.body.id, autoBody, autoSign(autoBody))).status).toBe(200);
  expect((await inbound(auto.body.id, autoBody, autoSign(autoBody, now() - 3_600))).status).toBe(401); // too old
  expect((await inbound(auto.body.id, `${autoBody}\n`, autoSign(autoBody))).status).toBe(401);
  expect((await inbound(auto.body.id, '{"id":1}', autoSign('{"id":1}'))).status).toBe(400);

  const stdSign = (secret: string, body: string, id = `msg_${randomUUID()}`, t = now()) => ({
    'webhook-id': id,
    'webhook-timestamp': String(t),
    'webhook-signature': signStandardWebhook(secret, id, t, body),
  });
  const stdBody = JSON.stringify({ type: 'order.shipped', data: { n: 2 } });
  expect((await inbound(std.body.id, stdBody, stdSign(stdSecret, stdBody))).status).toBe(200);
  expect((await inbound(generated.body.id, stdBody, stdSign(genSecret, stdBody))).status).toBe(200);
  expect((await inbound(std.body.id, stdBody, stdSign(genSecret, stdBody))).status).toBe(401); // another source's secret
  expect((await inbound(std.body.id, stdBody, stdSign(stdSecret, stdBody, undefined, now() + 3_600))).status).toBe(401);
  expect((await inbound(std.body.id, 'not json', stdSign(stdSecret, 'not json'))).status).toBe(400);
  expect((await inbound(`src_${'0'.repeat(26)}`, stdBody, stdSign(stdSecret, stdBody))).status).toBe(404);

  // --- published events, deliveries, dead letters ------------------------------------------------
  for (const key of ['idem-1', 'idem-1', 'idem-2']) {
    expect([200, 202]).toContain((await a('POST', '/v1/events', { body: { type: 'order.created', data: { key } }, headers: { 'idempotency-key': key } })).status);
  }
  const settled = async () => Number((await target.db('deliveries').whereIn('status', UNFINISHED_STATUSES).count({ n: '*' }))[0]!.n) === 0;
  await eventually(settled, 'every delivery succeeded or dead', 60_000, 100);
  expect(ok.requests.length).toBeGreaterThan(0);
  expect(failing.requests.length).toBeGreaterThan(0);
  for (const r of [...ok.requests, ...failing.requests, ...gone.requests]) {
    // Every outbound signature, both secrets' entries after the rotation.
    const header = String(r.headers['webhook-signature']);
    keep('outbound webhook-signature', header);
    for (const entry of header.split(' ')) keep('outbound signature entry', entry);
  }

  // --- replays -----------------------------------------------------------------------------------
  const dead = await target.db('deliveries').where({ endpoint_id: uuidOf('endpoint', failingId), status: 'dead' }).first('id');
  expect(dead).toBeTruthy();
  expect((await a('POST', `/v1/deliveries/${idOfUuid('delivery', dead.id)}/replay`, { body: { reason: 'log test' } })).status).toBe(202);
  expect((await a('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId: failingId }, reason: 'bulk', dryRun: true } })).status).toBe(200);
  expect((await a('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId: failingId }, reason: 'bulk' } })).status).toBe(202);
  await eventually(async () => failing.requests.some((r) => r.headers['webhook-replay'] === 'true'), 'a replay reached the failing receiver', 60_000, 100);
  await eventually(settled, 'replays settled', 60_000, 100);

  // --- reconciliation against a provider answering 500 with the API key echoed --------------------
  await target.db('messages').where({ message_id: 'm-rec' }).update({ updated_at: target.db.raw("now() - interval '1 hour'") });
  await eventually(async () => provider.requests.length > 0, 'the provider was polled', 30_000, 100);
  keep('reconcile Authorization header', String(provider.requests[0]!.headers.authorization));

  // --- a storage outage under every kind of request ----------------------------------------------
  target.cutStorage();
  try {
    const body2 = JSON.stringify({ event: 'message.status', message_id: 'm-cut', status: 'sent', timestamp: new Date().toISOString() });
    expect((await inbound(comm.body.id, body2, { 'x-signature': hmacSha256Hex(commSecret, body2) })).status).toBe(503); // cached source
    expect((await inbound(late.body.id, body2, { 'x-signature': hmacSha256Hex(commSecret, body2) })).status).toBe(503); // lookup fails
    const autoBody2 = JSON.stringify({ id: randomUUID(), event: 'order.created', subscription: { id: 'sub_1' }, data: {} });
    expect((await inbound(auto.body.id, autoBody2, autoSign(autoBody2))).status).toBe(503);
    expect((await inbound(std.body.id, stdBody, stdSign(stdSecret, stdBody))).status).toBe(503);
    expect((await a('GET', '/v1/endpoints')).status).toBe(503);
    expect((await a('POST', '/v1/endpoints', { body: { url: `${ok.url}/during-outage` } })).status).toBe(503);
    expect((await a('POST', '/v1/events', { body: { type: 'x', data: {} }, headers: { 'idempotency-key': 'cut' } })).status).toBe(503);
    expect((await call('POST', '/admin/tenants', { token: target.adminToken, body: { name: 'during-outage' } })).status).toBe(503);
    expect((await call('GET', '/v1/endpoints', { token: `sk_${randomBytes(32).toString('base64url')}` })).status).toBe(503);
    // Background work fails on its own too (sweeps, admission, reconciliation): wait until it said so.
    await eventually(async () => /sweep failed|admission round failed/.test(target.logs()), 'a dispatch loop logged the outage', 30_000, 100);
    await eventually(async () => /reconciliation could not read its work/.test(target.logs()), 'reconciliation logged the outage', 30_000, 100);
  } finally {
    target.restoreStorage();
  }
  await eventually(async () => (await request(target.url, 'GET', '/readyz')).status === 200, 'ready again', 30_000, 100);
  await eventually(async () => (await a('GET', '/v1/endpoints')).status === 200, 'tenant API back', 30_000, 100);

  // A storage that hangs instead of refusing: queries already sent on pooled connections never get
  // an answer and fail on the query timeout, the path where the driver's error names the query.
  await Promise.all(Array.from({ length: 6 }, () => a('GET', '/v1/endpoints'))); // pooled connections to hang on
  target.hangStorage();
  try {
    const answers = await Promise.all([
      a('GET', '/v1/endpoints'),
      a('GET', `/v1/events?messageId=m-rec`),
      a('POST', '/v1/endpoints', { body: { url: `${ok.url}/during-hang`, description: 'hang' } }),
      call('POST', '/admin/tenants', { token: target.adminToken, body: { name: 'during-hang' } }),
      inbound(std.body.id, stdBody, stdSign(stdSecret, stdBody)),
    ]);
    expect(answers.map((r) => r.status)).toEqual([503, 503, 503, 503, 503]);
  } finally {
    target.restoreStorage();
  }
  await eventually(async () => (await request(target.url, 'GET', '/readyz')).status === 200, 'ready again', 30_000, 100);
  await eventually(async () => (await a('GET', '/v1/endpoints')).status === 200, 'tenant API back', 30_000, 100);

  const after = JSON.stringify({ type: 'after.outage', data: {} });
  await eventually(async () => (await inbound(std.body.id, after, stdSign(stdSecret, after))).status === 200, 'intake back', 30_000, 200);

  // Hashes of keys are not plaintext, but a logged hash still lets a reader test a guessed key.
  for (const key of [keyA, keyB]) keep('API key hash', createHash('sha256').update(key).digest('hex'));

  return {
    secrets,
    close: async () => {
      await Promise.all(receivers.map((r) => r.close()));
    },
  };
}
