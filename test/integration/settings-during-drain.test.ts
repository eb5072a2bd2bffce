// An endpoint's settings changed while its backlog drains take effect within a second, for
// admission and for slot hand-off alike (both ask the one rule, next_due). Each case is judged by
// what a real receiver saw: when each request started and ended.
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publishMany, statusCounts } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';

/** A receiver that answers after `ms` and keeps each request's start and end. */
async function timedReceiver(ms: number, status: (req: ReceivedRequest) => number = () => 200) {
  const spans: Array<{ start: number; end: number; req: ReceivedRequest }> = [];
  const receiver = await startReceiver((req: ReceivedRequest, res: ServerResponse) => {
    const span = { start: Date.now(), end: Infinity, req };
    spans.push(span);
    setTimeout(() => {
      span.end = Date.now();
      res.writeHead(status(req)).end();
    }, ms);
  });
  return { receiver, spans };
}

/** The most requests in flight at once at any moment from `from` on. */
function maxInFlightSince(spans: Array<{ start: number; end: number }>, from: number): number {
  const moments = [from, ...spans.map((s) => s.start).filter((s) => s >= from)];
  return Math.max(0, ...moments.map((m) => spans.filter((s) => s.start <= m && s.end > m).length));
}

describe('endpoint settings changed during a drain', () => {
  let t: TestPlatform;
  let tenant: TestTenant;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    t = await startTestPlatform({ env: { ATTEMPT_TIMEOUT_MS: '8000' } });
    tenant = await t.createTenant('settings');
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t.stop();
  });

  it('maxConcurrency 8 → 1: within 1 s the receiver never holds more than one request', async () => {
    const { receiver, spans } = await timedReceiver(400);
    receivers.push(receiver);
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['conc.*'], maxConcurrency: 8 });
    await publishMany(tenant, 60, 8, 'conc.created');
    await eventually(async () => maxInFlightSince(spans, 0) === 8, 'eight requests in flight at once');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { maxConcurrency: 1 } });
    expect(res.status).toBe(200);
    const changedAt = Date.now();
    // Three more requests must start (and so end) after the limit has had its second to apply.
    await eventually(async () => spans.filter((s) => s.start >= changedAt + 1_000 && s.end !== Infinity).length >= 3, 'the drain goes on, one at a time', 20_000);
    expect(maxInFlightSince(spans, changedAt + 1_000)).toBe(1);
  });

  it('rateLimitPerSecond none → 2: within 1 s the receiver sees at most the bucket', async () => {
    const { receiver, spans } = await timedReceiver(20);
    receivers.push(receiver);
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['rate.*'], maxConcurrency: 4 });
    await publishMany(tenant, 150, 8, 'rate.created');
    await eventually(async () => spans.length >= 20, 'the drain is under way');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { rateLimitPerSecond: 2 } });
    expect(res.status).toBe(200);
    const from = Date.now() + 1_000;
    await eventually(async () => spans.some((s) => s.start >= from + 3_000), 'three more seconds of the drain', 20_000);
    const inWindow = spans.filter((s) => s.start >= from && s.start < from + 3_000).length;
    // Two a second, plus a full bucket of two at the start of the window.
    expect(inWindow).toBeLessThanOrEqual(2 * 3 + 2);
    expect(inWindow).toBeGreaterThanOrEqual(3);
  });

  it('status active → disabled: within 1 s nothing more starts, and the waiting work is dead-lettered', async () => {
    const { receiver, spans } = await timedReceiver(200);
    receivers.push(receiver);
    const ep = await createEndpoint(tenant, { url: receiver.url, eventTypes: ['stat.*'], maxConcurrency: 4 });
    await publishMany(tenant, 100, 8, 'stat.created');
    await eventually(async () => spans.length >= 8, 'the drain is under way');

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { status: 'disabled' } });
    expect(res.status).toBe(200);
    const changedAt = Date.now();
    // The positive signal: every delivery of the endpoint has reached a final status.
    const counts = await eventually(async () => {
      const c = await statusCounts(t, ep.id);
      return !c.pending && !c.queued && !c.in_flight && c;
    }, 'every delivery final');
    expect(counts.dead).toBeGreaterThan(0);
    expect(spans.filter((s) => s.start >= changedAt + 1_000)).toEqual([]);
  });

  it('ordering per-message → none: a message held behind a failing head flows within 1 s', async () => {
    const { receiver, spans } = await timedReceiver(10, (req) => (JSON.parse(req.body).data.i === 0 ? 500 : 200));
    receivers.push(receiver);
    const ep = await createEndpoint(tenant, {
      url: receiver.url,
      eventTypes: ['ord.*'],
      ordering: 'per-message',
      retryPolicy: { baseDelayMs: 60_000, maxDelayMs: 60_000 },
    });
    for (let i = 0; i < 5; i++) {
      const r = await tenant.call('POST', '/v1/events', { body: { type: 'ord.changed', messageId: 'm-held', data: { i } }, headers: { 'idempotency-key': `ord-${i}` } });
      expect(r.status).toBe(202);
    }
    // The head failed and waits a minute for its retry; the rest of its message waits behind it.
    await eventually(async () => spans.length === 1 && spans[0]!.end !== Infinity, 'the head failed once');
    // Recorded: the head is pending again (for its retry in a minute), and all five wait.
    await eventually(async () => (await statusCounts(t, ep.id)).pending === 5, 'the failure recorded');
    expect(spans).toHaveLength(1);

    const res = await tenant.call('PATCH', `/v1/endpoints/${ep.id}`, { body: { ordering: 'none' } });
    expect(res.status).toBe(200);
    const changedAt = Date.now();
    await eventually(async () => spans.length === 5, 'the four held events arrive', 5_000);
    expect(Math.max(...spans.slice(1).map((s) => s.start)) - changedAt).toBeLessThan(1_000);
  });
});
