// Per-endpoint protection as a receiver sees it: the circuit breaker (cooldown, then one probe),
// maxConcurrency and rateLimitPerSecond. Timings come from the receiver's own clock.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, publish, publishMany, settledDelivery, slowResponder } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

describe('per-endpoint limits', () => {
  let t: TestPlatform;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    // Receivers here hold requests on purpose; a long attempt timeout keeps that from counting as a failure.
    t = await startTestPlatform({ env: { CIRCUIT_FAILURE_THRESHOLD: '3', CIRCUIT_COOLDOWN_SECONDS: '2', ATTEMPT_TIMEOUT_MS: '8000' } });
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t.stop();
  });

  it.concurrent('circuit breaker: after 3 failures nothing is sent for the cooldown, then one probe, then everything drains', async () => {
    let failing = true;
    const probeMs = 300;
    const r = await startReceiver((_req, res) => {
      if (failing) return void res.writeHead(500).end();
      setTimeout(() => res.writeHead(200).end(), probeMs);
    });
    receivers.push(r);
    const tenant = await t.createTenant();
    const ep = await createEndpoint(tenant, { url: r.url, maxConcurrency: 10 });

    // One event fails three times in a row (its own retries) and opens the circuit.
    const first = await publish(tenant);
    const opened = await eventually(async () => {
      const row = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first();
      return row.circuit_open_until !== null && row;
    }, 'circuit open');
    expect(opened.consecutive_failures).toBe(3);
    expect(r.requests).toHaveLength(3);
    const openedAt = r.requests[2]!.at;

    // More work arrives while the circuit is open, and the receiver has recovered.
    failing = false;
    const others = await publishMany(tenant, 5);
    for (const id of [first, ...others]) expect((await settledDelivery(tenant, id, 10_000)).status).toBe('succeeded');
    expect(r.requests).toHaveLength(3 + 6);

    const [probe, next] = [r.requests[3]!, r.requests[4]!];
    // Nothing was sent during the 2 s cooldown...
    expect(probe.at - openedAt).toBeGreaterThanOrEqual(1_900);
    // ...then a single probe: nothing else went out until it had answered (300 ms), although
    // maxConcurrency would have allowed 10 at once.
    expect(next.at - probe.at).toBeGreaterThanOrEqual(probeMs - 10);
    // After the probe succeeded the rest went out together, not one by one (that would take
    // 4 × 300 ms more).
    expect(r.requests[8]!.at - next.at).toBeLessThan(1_000);
    const healed = await t.platform.db('endpoints').where({ id: uuidOf('endpoint', ep.id) }).first();
    expect(healed).toMatchObject({ consecutive_failures: 0, circuit_open_until: null, failing_since: null, status: 'active' });
  });

  it.concurrent('maxConcurrency 2: a slow receiver never holds more than 2 requests at once', async () => {
    const responder = slowResponder(300);
    const r = await startReceiver(responder);
    receivers.push(r);
    const tenant = await t.createTenant();
    await createEndpoint(tenant, { url: r.url, maxConcurrency: 2 });
    const started = Date.now();
    const ids = await publishMany(tenant, 10);
    for (const id of ids) expect((await settledDelivery(tenant, id)).status).toBe('succeeded');
    expect(r.requests).toHaveLength(10);
    expect(responder.maxInFlight).toBe(2);
    // 10 requests of 300 ms, two at a time.
    expect(Date.now() - started).toBeGreaterThanOrEqual(5 * 300);
  });

  it.concurrent('maxConcurrency 16: all 16 slots are used at once (the HTTP client does not cap an origin below it)', async () => {
    // The receiver holds requests until 16 are open at once (or 1.5 s passed), then answers them
    // all. Requests queued for a pooled connection instead would spend their attempt timeout unsent.
    const held: ServerResponse[] = [];
    let maxInFlight = 0;
    const release = () => held.splice(0).forEach((res) => res.writeHead(200).end());
    const r = await startReceiver((_req, res) => {
      held.push(res);
      maxInFlight = Math.max(maxInFlight, held.length);
      if (held.length === 16) release();
      else setTimeout(() => held.includes(res) && release(), 1_500);
    });
    receivers.push(r);
    const tenant = await t.createTenant();
    await createEndpoint(tenant, { url: r.url, maxConcurrency: 16 });
    const ids = await publishMany(tenant, 32);
    for (const id of ids) expect((await settledDelivery(tenant, id)).status).toBe('succeeded');
    expect(r.requests).toHaveLength(32);
    expect(maxInFlight).toBe(16);
  });

  it.concurrent('rateLimitPerSecond 5: 20 events are spread over at least ~3 s', async () => {
    const r = await startReceiver();
    receivers.push(r);
    const tenant = await t.createTenant();
    await createEndpoint(tenant, { url: r.url, rateLimitPerSecond: 5 });
    const published = Date.now();
    const ids = await publishMany(tenant, 20);
    for (const id of ids) expect((await settledDelivery(tenant, id)).status).toBe('succeeded');
    expect(r.requests).toHaveLength(20);
    const at = r.requests.map((q) => q.at);
    // A bucket of 5 that refills 5 per second: request k (0-based) cannot arrive before its token
    // exists, (k - 4) × 200 ms after the first admission; the last one 3 s after. Measured from
    // publishing (no admission can be earlier), because a busy machine may delay and bunch
    // deliveries after admission, but never advance them.
    at.forEach((time, k) => expect(time - published, `request ${k}`).toBeGreaterThanOrEqual(Math.max(0, k - 4) * 200 - 20));
    expect(at[19]! - published).toBeGreaterThanOrEqual(2_980);
  });
});
