import type { ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from '../helpers/api.js';
import { createEndpoint } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { uuidOf } from '../../src/domain/ids.js';

/** Sends a test event to one endpoint (POST /v1/endpoints/:id/test) and returns its ids. */
async function sendTest(tenant: TestTenant, endpointId: string, body: { type?: string; data?: unknown } = {}): Promise<{ eventId: string; deliveryId: string }> {
  const res = await tenant.call('POST', `/v1/endpoints/${endpointId}/test`, { body });
  expect(res.status, res.text).toBe(202);
  return res.body;
}

const signed = (r: ReceivedRequest) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

describe('what an endpoint and its deliveries show: circuit, policy in force, waiting reason', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let receiver: Receiver;
  const held: ServerResponse[] = [];

  beforeAll(async () => {
    // Two failures open the circuit for 5 s; an attempt may take long enough for the probe to be seen in flight.
    t = await startTestPlatform({ env: { CIRCUIT_FAILURE_THRESHOLD: '2', CIRCUIT_COOLDOWN_SECONDS: '5', ATTEMPT_TIMEOUT_MS: '30000', RETRY_MAX_ATTEMPTS: '7' } });
    tenant = await t.createTenant('insight');
    receiver = await startReceiver((_req, res, index) => {
      if (index < 2) res.writeHead(500).end('down');
      else held.push(res); // the half-open probe waits until the test lets it answer
    });
  });
  afterAll(async () => {
    for (const res of held) if (!res.writableEnded) res.writeHead(200).end();
    await t?.stop();
    await receiver?.close();
  });

  it('shows the effective retry policy: the endpoint override over the platform defaults', async () => {
    const res = await tenant.call('POST', '/v1/endpoints', { body: { url: 'http://127.0.0.1:9/none', retryPolicy: { maxAttempts: 3 } } });
    expect(res.status).toBe(201);
    const expected = {
      maxAttempts: 3,
      baseDelayMs: t.config.retry.baseDelayMs,
      maxDelayMs: t.config.retry.maxDelayMs,
      maxEventAgeSeconds: t.config.retry.maxEventAgeSeconds,
      retryAfterMaxSeconds: t.config.retry.retryAfterMaxSeconds,
      attemptTimeoutMs: 30_000,
    };
    expect(res.body.effectiveRetryPolicy).toEqual(expected);
    expect(res.body.circuit).toEqual({ state: 'closed', openUntil: null, consecutiveFailures: 0 });
    const got = await tenant.call('GET', `/v1/endpoints/${res.body.id}`);
    expect(got.body.effectiveRetryPolicy).toEqual(expected);
    // A base delay above the platform's maximum delay lifts the maximum with it: dispatch never waits
    // less than the base. The configured policy says only what was sent; the effective one tells.
    const patched = await tenant.call('PATCH', `/v1/endpoints/${res.body.id}`, { body: { retryPolicy: { baseDelayMs: 2000 } } });
    expect(t.config.retry.maxDelayMs).toBeLessThan(2000);
    expect(patched.body.retryPolicy).toEqual({ baseDelayMs: 2000 });
    const lifted = { ...expected, maxAttempts: 7, baseDelayMs: 2000, maxDelayMs: 2000 };
    expect(patched.body.effectiveRetryPolicy).toEqual(lifted);
    const list = await tenant.call('GET', '/v1/endpoints');
    expect(list.body.data.find((e: { id: string }) => e.id === res.body.id).effectiveRetryPolicy).toEqual(lifted);
  });

  it('goes closed → open → half_open → closed, and a pending delivery says it waits for the circuit', async () => {
    const ep = await createEndpoint(tenant, { url: `${receiver.url}/hook`, eventTypes: ['circuit.test'] });
    const { eventId } = await sendTest(tenant, ep.id, { type: 'circuit.test' });
    const delivery = async () => {
      const res = await tenant.call('GET', `/v1/deliveries?endpointId=${ep.id}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toHaveLength(1);
      return res.body.data[0];
    };
    const endpoint = async () => (await tenant.call('GET', `/v1/endpoints/${ep.id}`)).body;

    const open = await eventually(async () => {
      const e = await endpoint();
      return e.circuit.state === 'open' && e;
    }, 'the circuit to open after two failures');
    const openedAt = Date.now();
    expect(open.circuit.consecutiveFailures).toBe(2);
    const openUntil = Date.parse(open.circuit.openUntil);
    expect(openUntil).toBeGreaterThan(openedAt - 1000);
    expect(openUntil).toBeLessThanOrEqual(openedAt + 5_000);
    // Within the cooldown the delivery is pending, waiting for the circuit, in the list and on its own.
    const listed = await delivery();
    expect(receiver.requests).toHaveLength(2);
    expect({ status: listed.status, waitingFor: listed.waitingFor, eventId: listed.eventId }).toEqual({ status: 'pending', waitingFor: 'circuit', eventId });
    const single = await tenant.call('GET', `/v1/deliveries/${listed.id}`);
    expect(single.body.waitingFor).toBe('circuit');
    expect(single.body.attempts).toHaveLength(2);

    // The cooldown passes: one probe goes out and is held, and the circuit reads half_open meanwhile.
    await eventually(async () => receiver.requests.length === 3, 'the half-open probe', 20_000);
    const half = await endpoint();
    expect(half.circuit).toEqual({ state: 'half_open', openUntil: null, consecutiveFailures: 2 });
    expect((await delivery()).waitingFor).toBeNull(); // in flight: it waits for nothing

    held[0]!.writeHead(200).end('ok');
    const closed = await eventually(async () => {
      const e = await endpoint();
      return e.circuit.state === 'closed' && e;
    }, 'the circuit to close after the probe succeeded');
    expect(closed.circuit).toEqual({ state: 'closed', openUntil: null, consecutiveFailures: 0 });
    const done = await eventually(async () => {
      const d = await delivery();
      return d.status === 'succeeded' && d;
    }, 'the delivery to succeed');
    expect(done.waitingFor).toBeNull();
  });

  it('a retry waiting out its delay says retry_delay', async () => {
    const r = await startReceiver((_req, res) => {
      res.writeHead(503).end();
    });
    try {
      const ep = await createEndpoint(tenant, { url: `${r.url}/hook`, eventTypes: ['delay.test'], retryPolicy: { baseDelayMs: 600_000, maxDelayMs: 600_000 } });
      await sendTest(tenant, ep.id, { type: 'delay.test' });
      const d = await eventually(async () => {
        const res = await tenant.call('GET', `/v1/deliveries?endpointId=${ep.id}`);
        const row = res.body.data[0];
        return row?.attemptCount === 1 && row.status === 'pending' && row;
      }, 'the first attempt to fail');
      expect(d.waitingFor).toBe('retry_delay');
      expect(Date.parse(d.nextAttemptAt)).toBeGreaterThan(Date.now() + 60_000);
    } finally {
      await r.close();
    }
  });
});

describe('POST /v1/endpoints/:id/test', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let a: Receiver;
  let b: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('test-send');
    [a, b] = await Promise.all([startReceiver(), startReceiver()]);
  });
  afterAll(async () => {
    await t?.stop();
    await Promise.all([a?.close(), b?.close()]);
  });

  it('sends one signed platform.test event to that endpoint only, listed under its deliveries', async () => {
    // Both subscribe to everything, and B explicitly to platform.test: fan-out would reach both.
    const epA = await createEndpoint(tenant, { url: `${a.url}/a` });
    const epB = await createEndpoint(tenant, { url: `${b.url}/b`, eventTypes: ['platform.test', 'order.*'] });

    const res = await tenant.call('POST', `/v1/endpoints/${epA.id}/test`, { body: {} });
    expect(res.status, res.text).toBe(202);
    expect(res.body).toEqual({ eventId: expect.stringMatching(/^evt_/), deliveryId: expect.stringMatching(/^dlv_/) });
    const { eventId, deliveryId } = res.body;

    const got = await eventually(async () => a.requests[0], 'the test event at A');
    expect(got.headers['webhook-id']).toBe(eventId);
    expect(got.headers['webhook-delivery-id']).toBe(deliveryId);
    expect(new Webhook(epA.secret).verify(got.body, signed(got))).toEqual({ id: eventId, type: 'platform.test', timestamp: expect.any(String), messageId: null, data: {} });

    // Then a test event to B: had A's reached B too, it would have been due first and arrived first.
    const toB = await sendTest(tenant, epB.id);
    await eventually(async () => b.requests.length >= 1, 'the test event at B');
    expect(b.requests.map((r) => r.headers['webhook-id'])).toEqual([toB.eventId]);
    expect(a.requests.map((r) => r.headers['webhook-id'])).toEqual([eventId]);

    // Its success is recorded after A answered, so it is waited for, not assumed.
    const testDelivery = await eventually(async () => {
      const listedA = await tenant.call('GET', `/v1/deliveries?endpointId=${epA.id}`);
      const found = listedA.body.data.find((d: { id: string }) => d.id === deliveryId);
      return found?.status === 'succeeded' && found;
    }, 'the test delivery listed as succeeded');
    expect(testDelivery).toMatchObject({ eventId, eventType: 'platform.test', status: 'succeeded', endpointId: epA.id });
    const listedB = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}`);
    expect(listedB.body.data.map((d: { endpointId: string }) => d.endpointId)).toEqual([epA.id]);
    const event = await tenant.call('GET', `/v1/events/${eventId}`);
    expect(event.body.type).toBe('platform.test');
  });

  it('takes a type and data, and refuses what it cannot send', async () => {
    const ep = await createEndpoint(tenant, { url: `${a.url}/typed`, eventTypes: ['nothing.matches'] });
    const res = await tenant.call('POST', `/v1/endpoints/${ep.id}/test`, { body: { type: 'invoice.paid', data: { amount: 5 } } });
    expect(res.status, res.text).toBe(202);
    const got = await eventually(async () => a.requests.find((r) => r.headers['webhook-id'] === res.body.eventId), 'the typed test event');
    expect(JSON.parse(got.body)).toMatchObject({ type: 'invoice.paid', data: { amount: 5 } });

    // Its data is forwarded as written: digits past double precision, exponents, key order.
    const data = '{"big":12345678901234567890,"price":1.10,"far":1e400,"2":1,"1":2}';
    const exact = await tenant.call('POST', `/v1/endpoints/${ep.id}/test`, {
      rawBody: `{"type":"invoice.paid","data":${data}}`,
      headers: { 'content-type': 'application/json' },
    });
    expect(exact.status, exact.text).toBe(202);
    const gotExact = await eventually(async () => a.requests.find((r) => r.headers['webhook-id'] === exact.body.eventId), 'the exact test event');
    expect(gotExact.body).toContain(`"data":${data}}`);

    expectError(await tenant.call('POST', '/v1/endpoints/ep_00000000000000000000000000/test', { body: {} }), 404, 'not_found');
    expectError(await tenant.call('POST', `/v1/endpoints/${ep.id}/test`, { body: { type: 'bad type!' } }), 400, 'validation_failed');
    expectError(await tenant.call('POST', `/v1/endpoints/${ep.id}/test`, { body: { colour: 1 } }), 400, 'validation_failed');
    const other = await t.createTenant('other');
    expectError(await other.call('POST', `/v1/endpoints/${ep.id}/test`, { body: {} }), 404, 'not_found');

    expect((await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'disabled' } })).status).toBe(200);
    expectError(await tenant.call('POST', `/v1/endpoints/${ep.id}/test`, { body: {} }), 409, 'endpoint_disabled');
  });
});

describe('GET /v1/endpoints/:id/stats', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  let r: Receiver;

  beforeAll(async () => {
    t = await startTestPlatform();
    tenant = await t.createTenant('stats');
    // Answers with the status the event asks for; `drop` closes the connection without an answer.
    r = await startReceiver((req, res) => {
      const code = JSON.parse(req.body).data.code as number | 'drop';
      if (code === 'drop') res.destroy();
      else res.writeHead(code, code === 302 ? { location: 'http://127.0.0.1:9/' } : {}).end();
    });
  });
  afterAll(async () => {
    await t?.stop();
    await r?.close();
  });

  /** percentile_cont: linear interpolation between the closest ranks. */
  const percentile = (sorted: number[], p: number) => {
    const at = p * (sorted.length - 1);
    const lo = Math.floor(at);
    return sorted[lo]! + (sorted[Math.min(lo + 1, sorted.length - 1)]! - sorted[lo]!) * (at - lo);
  };

  it("counts the endpoint's attempts by outcome and status class, with latency percentiles and an hourly series", async () => {
    const once = { maxAttempts: 1 };
    const ep = await createEndpoint(tenant, { url: `${r.url}/stats`, retryPolicy: once });
    const other = await createEndpoint(tenant, { url: `${r.url}/other`, retryPolicy: once });
    const codes = [200, 204, 302, 404, 503, 'drop'] as const;
    for (const code of codes) await sendTest(tenant, ep.id, { data: { code } });
    await sendTest(tenant, other.id, { data: { code: 500 } }); // another endpoint's: never counted
    const finished = async (id: string, n: number) =>
      eventually(async () => {
        const res = await tenant.call('GET', `/v1/deliveries?endpointId=${id}`);
        const done = res.body.data.filter((d: { status: string }) => d.status === 'succeeded' || d.status === 'dead');
        return done.length === n && done;
      }, `${n} finished deliveries`, 30_000);
    const deliveries = await finished(ep.id, codes.length);
    await finished(other.id, 1);

    const durations: number[] = [];
    for (const d of deliveries) {
      const res = await tenant.call('GET', `/v1/deliveries/${d.id}`);
      durations.push(...res.body.attempts.map((a: { durationMs: number }) => a.durationMs));
    }
    durations.sort((x, y) => x - y);
    expect(durations).toHaveLength(codes.length);

    const res = await tenant.call('GET', `/v1/endpoints/${ep.id}/stats`);
    expect(res.status, res.text).toBe(200);
    const round = (v: number) => Math.round(v * 10) / 10;
    expect(res.body).toMatchObject({
      attempts: 6,
      succeeded: 2,
      failed: 4,
      byStatusClass: { '2xx': 2, '3xx': 1, '4xx': 1, '5xx': 1, network: 1 },
      latencyMs: { p50: round(percentile(durations, 0.5)), p95: round(percentile(durations, 0.95)), p99: round(percentile(durations, 0.99)) },
    });
    // The last 24 h by default, hour by hour, oldest first; the attempts are in the last hour or two.
    const until = Date.parse(res.body.until);
    expect(Math.abs(until - Date.now())).toBeLessThan(60_000);
    expect(until - Date.parse(res.body.since)).toBe(24 * 3_600_000);
    const series = res.body.series as { start: string; attempts: number; failed: number }[];
    expect(series.length).toBeGreaterThanOrEqual(24);
    expect(series.length).toBeLessThanOrEqual(25);
    for (let i = 1; i < series.length; i++) expect(Date.parse(series[i]!.start) - Date.parse(series[i - 1]!.start)).toBe(3_600_000);
    expect(series.reduce((n, h) => n + h.attempts, 0)).toBe(6);
    expect(series.reduce((n, h) => n + h.failed, 0)).toBe(4);
    expect(series.slice(0, -2).every((h) => h.attempts === 0)).toBe(true);

    // A window before any of it: nothing, and no percentiles of nothing.
    const since = new Date(Date.now() - 3 * 3_600_000).toISOString();
    const before = new Date(Date.now() - 2 * 3_600_000).toISOString();
    const empty = await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?since=${since}&until=${before}`);
    expect(empty.status, empty.text).toBe(200);
    expect(empty.body).toMatchObject({ attempts: 0, succeeded: 0, failed: 0, latencyMs: { p50: null, p95: null, p99: null } });
    expect(empty.body.series.length).toBeGreaterThanOrEqual(1);
    expect(empty.body.series.every((h: { attempts: number }) => h.attempts === 0)).toBe(true);

    const otherStats = await tenant.call('GET', `/v1/endpoints/${other.id}/stats`);
    expect(otherStats.body).toMatchObject({ attempts: 1, failed: 1, byStatusClass: { '5xx': 1, '2xx': 0 } });

    // Counted through their deliveries' tenant: attempts no longer store their own (migration
    // 20261203000042).
    const ids = deliveries.map((d: { id: string }) => d.id);
    // The four failures' rows: the two first tries that succeeded are stored in their deliveries.
    const written = await t.platform.db('attempts').whereIn('delivery_id', ids.map((id: string) => uuidOf('delivery', id))).pluck('tenant_id');
    expect(written).toEqual(Array(4).fill(null));
  });

  it('refuses a window that is backwards, too long or not a time, and an endpoint that is not yours', async () => {
    const ep = await createEndpoint(tenant, { url: `${r.url}/v` });
    const at = (ms: number) => new Date(ms).toISOString();
    const now = Date.now();
    const backwards = await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?since=${at(now)}&until=${at(now - 1000)}`);
    expectError(backwards, 400, 'validation_failed');
    expect(backwards.body.error.details).toEqual([{ path: 'since', message: 'must not be after until' }]);
    const long = await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?since=${at(now - 32 * 86_400_000)}&until=${at(now)}`);
    expectError(long, 400, 'validation_failed');
    expect(long.body.error.message).toContain('31 days');
    expect((await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?since=${at(now - 31 * 86_400_000)}&until=${at(now)}`)).status).toBe(200);
    expectError(await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?since=yesterday`), 400, 'validation_failed');
    expectError(await tenant.call('GET', `/v1/endpoints/${ep.id}/stats?from=${at(now)}`), 400, 'validation_failed');
    expectError(await tenant.call('GET', '/v1/endpoints/ep_00000000000000000000000000/stats'), 404, 'not_found');
    const stranger = await t.createTenant('stranger');
    expectError(await stranger.call('GET', `/v1/endpoints/${ep.id}/stats`), 404, 'not_found');
  });
});
