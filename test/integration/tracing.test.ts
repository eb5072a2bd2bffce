// One trace per event, end to end, as a collector receives it: the api runs in this process with
// tracing on, the workers in their own processes, and every span they export arrives at a real
// OTLP/HTTP receiver on loopback.
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTracing, stopTracing } from '../../src/infra/tracing.js';
import { startWorkerProcess, type WorkerProcess } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { createSource, postCallback, sign } from '../helpers/intake.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const KIND = { internal: 1, server: 2, client: 3 };
// JSON, which the test's receiver reads; the platform's default is http/protobuf.
const exportEnv = (otlp: OtlpReceiver) => ({ OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50' });
const hex = (bytes: number) => randomBytes(bytes).toString('hex');

let otlp: OtlpReceiver;
let t: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;
let endpoint: { id: string; secret: string };
/** The in-process api's log lines. */
const logLines: string[] = [];
let source: { id: string; secret: string };
const workers: WorkerProcess[] = [];
/** How the receiver answers the n-th request (0-based); 200 unless listed. */
const failFirst = new Set<number>([0]);

function spansOf(traceId: string): ReceivedSpan[] {
  return otlp.spans.filter((s) => s.traceId === traceId);
}
function one(spans: ReceivedSpan[], name: string): ReceivedSpan {
  const found = spans.filter((s) => s.name === name);
  expect(found.map((s) => s.name), `exactly one ${name}`).toEqual([name]);
  return found[0]!;
}
/** Each attempt is the CLIENT span of its request. */
function attemptsOf(eventId: string): ReceivedSpan[] {
  return otlp.spans.filter((s) => s.name === 'POST' && s.kind === KIND.client && s.attributes['webhook.event_id'] === eventId);
}

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  Object.assign(process.env, exportEnv(otlp), { OTEL_SERVICE_NAME: 'relay-api-under-test' });
  expect(await startTracing(process.env, '0.0.0-test', 'api')).toBe(true);
  t = await startTestPlatform({ role: 'api', logs: new Writable({ write: (chunk: Buffer, _e, done) => (logLines.push(chunk.toString()), done()) }) });
  tenant = await t.createTenant('traced');
  receiver = await startReceiver((_req, res, index) => {
    res.writeHead(failFirst.has(index) ? 500 : 200).end();
  });
  const created = await tenant.call('POST', '/v1/endpoints', { body: { url: receiver.url, propagateTraceContext: true } });
  expect(created.status, created.text).toBe(201);
  expect(created.body.propagateTraceContext).toBe(true);
  endpoint = { id: created.body.id, secret: created.body.secret };
  source = await createSource(tenant, 'standard-webhooks');
}, 60_000);

afterAll(async () => {
  for (const w of workers) w.kill('SIGKILL');
  await t?.stop();
  await stopTracing();
  await receiver?.close();
  await otlp?.close();
});

describe('a callback, its fan-out and every attempt are one trace', () => {
  const traceId = hex(16);
  const callerSpan = hex(8);
  let eventId: string;
  let receiptId: string;
  let pids: number[];

  it('joins the caller trace and keeps its parentage across a retry taken by another worker', async () => {
    const first = startWorkerProcess(t, exportEnv(otlp));
    workers.push(first);
    await first.port();
    const cb = sign.standard(source.secret, JSON.stringify({ type: 'order.paid', data: { amount: 12345678901234567890n.toString() } }));
    const res = await postCallback(t, source.id, { ...cb, headers: { ...cb.headers, traceparent: `00-${traceId}-${callerSpan}-01` } });
    expect(res.status, res.text).toBe(200);
    ({ eventId, receiptId } = res.body);

    // The first attempt fails (500); its worker stops before the retry, and a new worker makes it.
    await eventually(async () => receiver.requests.length >= 1, 'first attempt');
    first.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    const second = startWorkerProcess(t, exportEnv(otlp));
    workers.push(second);
    await eventually(async () => receiver.requests.length >= 2, 'retry by the second worker');
    await eventually(async () => attemptsOf(eventId).length === 2, 'both attempt spans exported');
    pids = [first.pid, second.pid];

    const spans = spansOf(traceId);
    const server = one(spans, 'POST /inbound/:sourceId');
    expect(server.kind).toBe(KIND.server);
    expect(server.parentSpanId).toBe(callerSpan);
    expect(server.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/inbound/:sourceId',
      'http.response.status_code': 200,
      'webhook.event_id': eventId,
      'webhook.receipt_id': receiptId,
      'webhook.outcome': 'accepted',
    });
    const verify = one(spans, 'webhook.verify');
    expect(verify.parentSpanId).toBe(server.spanId);
    expect(verify.attributes['webhook.verify.result']).toBe('valid');
    const accept = one(spans, 'webhook.accept');
    expect(accept.parentSpanId).toBe(server.spanId);
    expect(accept.attributes).toMatchObject({ 'webhook.event_id': eventId, 'webhook.receipt_id': receiptId });
    const fanOut = one(spans, 'webhook.fan_out');
    expect(fanOut.parentSpanId).toBe(accept.spanId);
    expect(fanOut.attributes['webhook.deliveries.pending']).toBe(1);

    const attempts = attemptsOf(eventId).sort((a, b) => Number(a.attributes['webhook.attempt']) - Number(b.attributes['webhook.attempt']));
    expect(attempts.map((a) => [a.traceId, a.parentSpanId])).toEqual([
      [traceId, fanOut.spanId],
      [traceId, fanOut.spanId],
    ]);
    expect(attempts.map((a) => [a.attributes['webhook.attempt'], a.attributes['webhook.trigger'], a.attributes['webhook.outcome']])).toEqual([
      [1, 'initial', 'retry'],
      [2, 'retry', 'success'],
    ]);
    expect(attempts.map((a) => a.attributes['webhook.endpoint_id'])).toEqual([endpoint.id, endpoint.id]);
    // Made by the two worker processes, one each.
    expect(attempts.map((a) => a.resource['process.pid'])).toEqual(pids);
    const { port } = new URL(receiver.url);
    expect(attempts.map((c) => c.attributes['http.response.status_code'])).toEqual([500, 200]);
    for (const c of attempts) {
      expect(c.attributes).toMatchObject({
        'http.request.method': 'POST',
        'server.address': '127.0.0.1',
        'server.port': Number(port),
        'url.full': `${receiver.url}/`,
        'webhook.endpoint_id': endpoint.id,
      });
    }
    // The receiver continues the trace from each attempt's own span.
    expect(receiver.requests.slice(0, 2).map((r) => r.headers.traceparent)).toEqual(attempts.map((c) => `00-${traceId}-${c.spanId}-01`));
  }, 60_000);

  it('a replay is a new trace whose attempt links to the original', async () => {
    const delivery = await tenant.call('GET', `/v1/events/${eventId}`);
    const deliveryId = delivery.body.deliveries[0].id as string;
    const replay = await tenant.call('POST', `/v1/deliveries/${deliveryId}/replay`, { body: { reason: 'trace test' } });
    expect(replay.status, replay.text).toBe(202);
    await eventually(async () => attemptsOf(eventId).length === 3, 'the replayed attempt exported');
    const replayed = attemptsOf(eventId).find((a) => a.attributes['webhook.trigger'] === 'replay')!;
    expect(replayed.traceId).not.toBe(traceId);
    const replaySpan = one(spansOf(replayed.traceId), 'webhook.replay');
    expect(replayed.parentSpanId).toBe(replaySpan.spanId);
    const fanOut = one(spansOf(traceId), 'webhook.fan_out');
    expect(replayed.links.map((l) => [l.traceId, l.spanId])).toEqual([[traceId, fanOut.spanId]]);
    const request = one(spansOf(replayed.traceId), 'POST /v1/deliveries/:id/replay');
    expect(replaySpan.parentSpanId).toBe(request.spanId);
    expect(request.parentSpanId).toBeUndefined();
  }, 30_000);

  it('an event the sampler dropped exports nothing, at intake or at any attempt', async () => {
    const droppedTrace = hex(16);
    const cb = sign.standard(source.secret, JSON.stringify({ type: 'order.paid', data: { n: 2 } }));
    const dropped = await postCallback(t, source.id, { ...cb, headers: { ...cb.headers, traceparent: `00-${droppedTrace}-${hex(8)}-00` } });
    expect(dropped.status).toBe(200);
    const droppedEvent = dropped.body.eventId as string;
    await eventually(async () => receiver.eventIds().has(droppedEvent), 'the unsampled event delivered');
    // A sampled event published after it: once its attempt arrives, the worker has exported
    // everything it made before, the dropped event's attempt included had there been one.
    const published = await tenant.call('POST', '/v1/events', { body: { type: 'order.paid', data: { n: 3 } } });
    expect(published.status).toBe(202);
    await eventually(async () => attemptsOf(published.body.id).length === 1, 'the published event traced');
    const publishTrace = attemptsOf(published.body.id)[0]!.traceId;
    // The request's span ends when its answer is written, which a busy process can get to after
    // the attempt's span was exported: it comes in a later batch.
    await eventually(async () => spansOf(publishTrace).some((s) => s.name === 'POST /v1/events'), 'the publish request traced');
    expect(one(spansOf(publishTrace), 'POST /v1/events').parentSpanId).toBeUndefined();
    expect(one(spansOf(publishTrace), 'webhook.fan_out').spanId).toBe(attemptsOf(published.body.id)[0]!.parentSpanId);

    expect(spansOf(droppedTrace)).toEqual([]);
    expect(otlp.spans.filter((s) => Object.values(s.attributes).includes(droppedEvent))).toEqual([]);
    const request = receiver.requests.find((r) => r.headers['webhook-id'] === droppedEvent)!;
    expect(request.headers.traceparent).toBeUndefined();
  }, 30_000);

  it('exports no secret, key or signature', async () => {
    const everything = otlp.bodies.join('\n');
    const signatures = receiver.requests.map((r) => String(r.headers['webhook-signature']));
    for (const secret of [source.secret, endpoint.secret, tenant.apiKey, t.config.adminToken, ...signatures]) {
      expect(everything.includes(secret), `exported ${secret.slice(0, 8)}…`).toBe(false);
    }
    expect(everything).not.toMatch(/whsec_|whsk_|adm_|authorization|webhook-signature/i);
  });
});

describe('logs and metrics point at the trace', () => {
  it("a failed request's log line carries its trace and span ids", async () => {
    // A source whose stored secret no longer opens: the callback fails (5xx), which is logged.
    const broken = await createSource(tenant, 'standard-webhooks');
    await t.platform.db('sources').where({ id: broken.id }).update({ secret_enc: 'not-a-sealed-secret' });
    const traceId = hex(16);
    const cb = sign.standard(broken.secret, JSON.stringify({ type: 'order.paid', data: {} }));
    const res = await postCallback(t, broken.id, { ...cb, headers: { ...cb.headers, traceparent: `00-${traceId}-${hex(8)}-01` } });
    expect(res.status).toBeGreaterThanOrEqual(500);
    await eventually(async () => spansOf(traceId).length > 0, 'the failed request exported');
    const server = one(spansOf(traceId), 'POST /inbound/:sourceId');
    const line = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'request failed' && l.path === `/inbound/${broken.id}`);
    expect(line).toMatchObject({ trace_id: traceId, span_id: server.spanId });
  });

  it('OpenMetrics carries exemplars with trace ids; the Prometheus text keeps its names', async () => {
    const open = await request(t.url, 'GET', '/metrics', { headers: { accept: 'application/openmetrics-text; version=1.0.0' } });
    expect(open.headers.get('content-type')).toMatch(/application\/openmetrics-text/);
    const exemplar = /^webhook_inbound_ack_seconds_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\}/m.exec(open.text);
    expect(exemplar, 'an exemplar on the intake histogram').not.toBeNull();
    expect(otlp.spans.some((s) => s.traceId === exemplar![1] && s.spanId === exemplar![2] && s.kind === KIND.server)).toBe(true);
    expect(open.text).toMatch(/^# TYPE webhook_inbound_receipts counter$/m);
    expect(open.text.trimEnd().endsWith('# EOF')).toBe(true);
    // The worker's attempts too, though it runs without the async context manager.
    const worker = workers.at(-1)!;
    const workerOpen = await request(`http://127.0.0.1:${await worker.port()}`, 'GET', '/metrics', { headers: { accept: 'application/openmetrics-text' } });
    const attempt = /^webhook_attempt_duration_seconds_bucket\{[^}]*\} \d+ # \{trace_id="([0-9a-f]{32})",span_id="([0-9a-f]{16})"\}/m.exec(workerOpen.text);
    expect(attempt, 'an exemplar on the attempt histogram').not.toBeNull();
    expect(otlp.spans.some((s) => s.traceId === attempt![1] && s.spanId === attempt![2] && s.kind === KIND.client)).toBe(true);
    const plain = await request(t.url, 'GET', '/metrics');
    expect(plain.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(plain.text).toMatch(/^# TYPE webhook_inbound_receipts_total counter$/m);
    expect(plain.text).not.toMatch(/ # \{trace_id=/);
  });
});
