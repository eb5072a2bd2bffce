// Reconciliation against a fake Momo provider (a real HTTP server on 127.0.0.1:0): a message stuck
// in a non-final status is looked up, a newer status goes through the same intake path as a callback
// (receipt origin `reconcile`, the callback's dedupe key, the same forwarding), and a late real
// callback for it is a duplicate. A provider that is down or answers garbage is counted, retried on
// the next run, and never stops the worker.
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { createDeliveryClient } from '../../src/outbound/http-client.js';
import { IntakeService } from '../../src/inbound/intake-service.js';
import { createLogger } from '../../src/infra/logger.js';
import { Reconciler } from '../../src/ops/reconciler.js';
import { postCallback, readMetrics, sampleOf, sign, type MetricSamples } from '../helpers/intake.js';
import { startMessageReceiver, type MessageReceiver } from '../helpers/ordering.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { communication } from '../helpers/providers.js';

// ---------------------------------------------------------------------------------------------
// The fake provider

type Answer = { status: number; body: string; contentType?: string } | 'hang' | 'reset';

interface FakeProvider {
  /** Base URL given to the source, with a path prefix to show it is kept. */
  baseUrl: string;
  requests: Array<{ path: string; headers: IncomingHttpHeaders }>;
  /** Polls per message id. */
  polls(messageId: string): number;
  answer(messageId: string, answer: Answer): void;
  /** Closes the port: nothing listens there until start(). */
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

const json = (body: unknown): Answer => ({ status: 200, body: JSON.stringify(body), contentType: 'application/json' });
const status = (messageId: string, value: string): Answer => json({ message_id: messageId, status: value, updated_at: new Date().toISOString() });

async function startProvider(): Promise<FakeProvider> {
  const requests: FakeProvider['requests'] = [];
  const answers = new Map<string, Answer>();
  const hanging = new Set<ServerResponse>();
  let server: Server;
  let port = 0;
  const listen = async () => {
    server = createServer((req, res) => {
      requests.push({ path: req.url ?? '', headers: req.headers });
      const id = decodeURIComponent((req.url ?? '').replace(/^\/api\/messages\//, ''));
      const a = answers.get(id) ?? { status: 404, body: '{"error":"not found"}' };
      if (a === 'hang') return void hanging.add(res);
      if (a === 'reset') return void req.socket.destroy();
      res.writeHead(a.status, { 'content-type': a.contentType ?? 'text/plain' }).end(a.body);
    });
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  };
  const stop = () =>
    new Promise<void>((resolve) => {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server.closeAllConnections();
      server.close(() => resolve());
    });
  await listen();
  return {
    baseUrl: `http://127.0.0.1:${port}/api`,
    requests,
    polls: (messageId) => requests.filter((r) => r.path === `/api/messages/${encodeURIComponent(messageId)}`).length,
    answer: (messageId, a) => void answers.set(messageId, a),
    stop,
    start: listen, // the same port again
    close: () => (server.listening ? stop() : Promise.resolve()),
  };
}

// ---------------------------------------------------------------------------------------------

const API_KEY = 'momo_live_reconcile_key_0123456789';
const POLLS = 'webhook_reconcile_polls_total';
const pollsDelta = (before: MetricSamples, after: MetricSamples, outcome: string) => sampleOf(after, POLLS, { outcome }) - sampleOf(before, POLLS, { outcome });
const noPolls = { changed: 0, unchanged: 0, provider_error: 0, invalid_response: 0 };

let t: TestPlatform;
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  // A short timeout keeps the hanging-provider case quick, yet long enough that no answered poll
  // outruns it on a loaded host: at 1 s, the race below counted 3 of its 5 polls as changed or
  // unchanged in CI (a poll cut off is a provider error). An interval of 1 s keeps the poll spread
  // (a quarter of the interval) short.
  // The platform's own timer is stopped: the tests drive runs.
  t = await startTestPlatform({ env: { RECONCILE_INTERVAL_SECONDS: '1', ATTEMPT_TIMEOUT_MS: '5000' } });
  await t.platform.reconciler!.stop();
});
afterAll(async () => {
  for (const close of closers) await close();
  await t.stop();
});

interface Setup {
  tenant: TestTenant;
  provider: FakeProvider;
  sourceId: string;
  secret: string;
  r: MessageReceiver;
  callback(messageId: string, status: string): ReturnType<typeof postCallback>;
  /** Makes messages of this source due: last changed an hour ago, never polled. */
  makeDue(...messageIds: string[]): Promise<void>;
  messageStatus(messageId: string): Promise<string | null>;
}

/** A tenant with a reconciling momo-communication source pointed at its own fake provider. */
async function setup(): Promise<Setup> {
  const provider = await startProvider();
  closers.push(provider.close);
  const r = await startMessageReceiver(() => 1);
  closers.push(r.close);
  const tenant = await t.createTenant();
  const src = await tenant.call('POST', '/v1/sources', {
    body: { type: 'momo-communication', name: 'sms', reconcile: { baseUrl: provider.baseUrl, apiKey: API_KEY, afterSeconds: 10 } },
  });
  expect(src.status, src.text).toBe(201);
  expect(src.body.reconcile).toEqual({ baseUrl: provider.baseUrl, afterSeconds: 10 });
  expect(src.text).not.toContain(API_KEY);
  const ep = await tenant.call('POST', '/v1/endpoints', { body: { url: r.url } });
  expect(ep.status).toBe(201);
  const sourceId = src.body.id as string;
  const messages = () => t.platform.db('messages').where({ source_id: sourceId });
  return {
    tenant,
    provider,
    sourceId,
    secret: src.body.secret as string,
    r,
    callback: (messageId, value) => postCallback(t, sourceId, sign.communication(src.body.secret, communication.messageStatus(messageId, value))),
    makeDue: async (...ids) => {
      await messages().whereIn('message_id', ids).update({ updated_at: t.platform.db.raw("now() - interval '1 hour'"), reconciled_at: null });
    },
    messageStatus: async (messageId) => (await messages().where({ message_id: messageId }).first('status'))?.status ?? null,
  };
}

const runOnce = () => t.platform.reconciler!.runOnce();
const countOf = async (q: { count(c: string): PromiseLike<Array<Record<string, unknown>>> }) => Number((await q.count('* as n'))[0]!.n);

describe('a message stuck at sent', () => {
  it('is reconciled to delivered through the intake path; the late real callback is a duplicate; nothing is forwarded twice', async () => {
    const s = await setup();
    for (const value of ['accepted', 'sent']) expect((await s.callback('m-stuck', value)).body.status).toBe('accepted');
    await eventually(async () => s.r.delivered().size === 2, 'accepted and sent forwarded');
    s.provider.answer('m-stuck', status('m-stuck', 'delivered'));

    // Not yet left alone for afterSeconds (10 s): not polled.
    expect(await runOnce()).toEqual(noPolls);
    expect(s.provider.requests).toHaveLength(0);

    await s.makeDue('m-stuck');
    const before = await readMetrics(t.url);
    expect(await runOnce()).toEqual({ ...noPolls, changed: 1 });
    const after = await readMetrics(t.url);
    expect(pollsDelta(before, after, 'changed')).toBe(1);

    // The provider was asked with the source's API key, at <baseUrl>/messages/<id>.
    expect(s.provider.requests).toHaveLength(1);
    expect(s.provider.requests[0]).toMatchObject({ path: '/api/messages/m-stuck', headers: { authorization: `Bearer ${API_KEY}` } });

    // Recorded like a callback: a new event (origin reconcile) with one receipt of origin reconcile.
    const timeline = await s.tenant.call('GET', '/v1/messages/m-stuck');
    expect(timeline.body).toMatchObject({ status: 'delivered', final: true });
    const reconciled = timeline.body.events.at(-1);
    expect(reconciled).toMatchObject({ origin: 'reconcile', status: 'delivered', stale: false, receipts: { count: 1 } });
    // Rows name the event by the uuid its TypeID encodes.
    const reconciledKey = uuidOf('event', reconciled.id);
    expect(await t.platform.db('receipts').where({ event_id: reconciledKey }).select('origin', 'outcome')).toEqual([{ origin: 'reconcile', outcome: 'accepted' }]);
    // ...and forwarded once, like any accepted callback.
    await eventually(async () => s.r.delivered().has(reconciled.id), 'reconciled status forwarded');

    // The provider's own callback arrives late: same transition, so a duplicate of that event.
    const late = await s.callback('m-stuck', 'delivered');
    expect(late.status).toBe(200);
    expect(late.body).toMatchObject({ status: 'duplicate', eventId: reconciled.id });
    // The receiver has answered; the attempt's record may still be on its way.
    const deliveries = () => t.platform.db('deliveries').where({ event_id: reconciledKey }).select('status');
    await eventually(async () => JSON.stringify(await deliveries()) === JSON.stringify([{ status: 'succeeded' }]), 'the one delivery recorded as succeeded');
    expect(s.r.arrivals.map((a) => a.eventId)).toEqual(timeline.body.events.map((e: { id: string }) => e.id));

    // Final now: never polled again, however long it is left alone.
    await s.makeDue('m-stuck');
    expect(await runOnce()).toEqual(noPolls);
    expect(s.provider.requests).toHaveLength(1);
    expect(s.r.arrivals).toHaveLength(3);
  });

  it('a reconcile run and the real callback for the same transition racing: one event, forwarded once', async () => {
    const s = await setup();
    const ids = ['race-1', 'race-2', 'race-3', 'race-4', 'race-5'];
    for (const m of ids) {
      expect((await s.callback(m, 'sent')).body.status).toBe('accepted');
      s.provider.answer(m, status(m, 'delivered'));
    }
    await s.makeDue(...ids);
    const [counts, ...answers] = await Promise.all([runOnce(), ...ids.map((m) => s.callback(m, 'delivered'))]);
    // A message whose callback committed before the run claimed it is final and not polled at all.
    expect(counts.changed + counts.unchanged).toBe(ids.reduce((n, m) => n + s.provider.polls(m), 0));
    for (const [i, m] of ids.entries()) {
      expect(['accepted', 'duplicate']).toContain(answers[i]!.body.status);
      const events = await t.platform.db('events').where({ source_id: s.sourceId, message_id: m, status: 'delivered' }).select('id');
      expect(events, m).toHaveLength(1);
      // One receipt accepted the transition; a poll that lost the race left a duplicate receipt.
      const receipts = await t.platform.db('receipts').where({ event_id: events[0]!.id }).orderBy('outcome').select('origin', 'outcome');
      expect(receipts.map((x) => x.outcome)).toEqual(s.provider.polls(m) === 1 ? ['accepted', 'duplicate'] : ['accepted']);
      expect(new Set(receipts.map((x) => x.origin)).size).toBe(receipts.length);
      expect(await countOf(t.platform.db('deliveries').where({ event_id: events[0]!.id }))).toBe(1);
    }
    await eventually(async () => s.r.delivered().size === 10, 'sent and delivered of five messages forwarded');
    expect(s.r.arrivals).toHaveLength(10);
  });

  it('a provider that is behind (reports an older or the same status) changes nothing and records nothing', async () => {
    const s = await setup();
    for (const value of ['accepted', 'sent']) expect((await s.callback('m-behind', value)).body.status).toBe('accepted');
    expect((await s.callback('m-same', 'sent')).body.status).toBe('accepted');
    s.provider.answer('m-behind', status('m-behind', 'accepted'));
    s.provider.answer('m-same', status('m-same', 'sent'));
    const receipts = () => countOf(t.platform.db('receipts').where({ source_id: s.sourceId }));
    const before = await receipts();
    // Polled on every run while it stays open; each time it must leave no trace but the metric.
    for (let run = 0; run < 2; run++) {
      await s.makeDue('m-behind', 'm-same');
      expect(await runOnce()).toEqual({ ...noPolls, unchanged: 2 });
    }
    expect(s.provider.polls('m-behind')).toBe(2);
    expect(await receipts()).toBe(before);
    expect(await countOf(t.platform.db('events').where({ source_id: s.sourceId }))).toBe(3);
    expect(await s.messageStatus('m-behind')).toBe('sent');
    for (const m of ['m-behind', 'm-same']) await s.callback(m, 'delivered'); // final: out of the way
  });

  it('an order event (no message status) on a reconciling source is never polled', async () => {
    const s = await setup();
    const body = JSON.stringify({ event: 'order.created', order_id: 'o-77', timestamp: new Date().toISOString() });
    expect((await postCallback(t, s.sourceId, sign.communication(s.secret, body))).body.status).toBe('accepted');
    expect((await s.callback('m-open', 'sent')).body.status).toBe('accepted');
    s.provider.answer('m-open', status('m-open', 'sent'));
    await s.makeDue('o-77', 'm-open');
    // The message with a status is asked about (and unchanged); the order id is not.
    expect(await runOnce()).toEqual({ ...noPolls, unchanged: 1 });
    expect(s.provider.requests.map((r) => r.path)).toEqual(['/api/messages/m-open']);
    await s.callback('m-open', 'delivered'); // final: out of the way of later tests
  });
});

describe('a provider that is down or answers garbage', () => {
  it('down (closed port): counted as provider_error, nothing changes, and the next run retries', async () => {
    const s = await setup();
    expect((await s.callback('m-down', 'accepted')).body.status).toBe('accepted');
    await s.makeDue('m-down');
    await s.provider.stop();

    const before = await readMetrics(t.url);
    expect(await runOnce()).toEqual({ ...noPolls, provider_error: 1 });
    expect(pollsDelta(before, await readMetrics(t.url), 'provider_error')).toBe(1);
    expect(await s.messageStatus('m-down')).toBe('accepted');
    expect(await countOf(t.platform.db('events').where({ source_id: s.sourceId }))).toBe(1);

    // The worker is unharmed: healthy, and still delivering.
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect((await s.callback('m-other', 'accepted')).body.status).toBe('accepted');
    await eventually(async () => s.r.delivered().size === 2, 'deliveries continue');

    // The provider is back; the message is due again at the next run (the interval has passed).
    await s.provider.start();
    s.provider.answer('m-down', status('m-down', 'sent'));
    await t.platform.db('messages').where({ source_id: s.sourceId, message_id: 'm-down' }).update({ reconciled_at: t.platform.db.raw("now() - interval '1 hour'") });
    const again = await readMetrics(t.url);
    const counts = await runOnce();
    expect(counts).toMatchObject({ changed: 1, provider_error: 0 });
    expect(pollsDelta(again, await readMetrics(t.url), 'changed')).toBe(1);
    expect(await s.messageStatus('m-down')).toBe('sent');
    expect(s.provider.polls('m-down')).toBe(1); // the refused connection never reached it
    await eventually(async () => s.r.delivered().size === 3, 'the reconciled status forwarded');
    for (const m of ['m-down', 'm-other']) await s.callback(m, 'delivered'); // final: out of the way
  });

  it('garbage (non-JSON, wrong message_id, unknown status, 500, reset, hang): recorded, retried next run, worker keeps running', async () => {
    const s = await setup();
    const cases: Array<[string, Answer, 'invalid_response' | 'provider_error']> = [
      ['g-html', { status: 200, body: '<html>maintenance</html>', contentType: 'text/html' }, 'invalid_response'],
      ['g-null', json(null), 'invalid_response'],
      ['g-wrong-id', json({ message_id: 'someone-else', status: 'delivered' }), 'invalid_response'],
      ['g-unknown', json({ message_id: 'g-unknown', status: 'teleported' }), 'invalid_response'],
      ['g-no-status', json({ message_id: 'g-no-status' }), 'invalid_response'],
      ['g-500', { status: 500, body: JSON.stringify({ message_id: 'g-500', status: 'delivered' }) }, 'provider_error'],
      ['g-reset', 'reset', 'provider_error'],
      ['g-hang', 'hang', 'provider_error'], // cut off by the attempt timeout (5 s here)
    ];
    for (const [m, answer] of cases) {
      expect((await s.callback(m, 'sent')).body.status).toBe('accepted');
      s.provider.answer(m, answer);
    }
    await eventually(async () => s.r.delivered().size === cases.length, 'sent forwarded');
    await s.makeDue(...cases.map(([m]) => m));

    const before = await readMetrics(t.url);
    const counts = await runOnce();
    const after = await readMetrics(t.url);
    expect(counts).toEqual({ ...noPolls, invalid_response: 5, provider_error: 3 });
    expect(pollsDelta(before, after, 'invalid_response')).toBe(5);
    expect(pollsDelta(before, after, 'provider_error')).toBe(3);
    for (const [m] of cases) expect(s.provider.polls(m), m).toBe(1);
    // Nothing was believed: statuses unchanged, no new events, nothing more forwarded.
    for (const [m] of cases) expect(await s.messageStatus(m), m).toBe('sent');
    expect(await countOf(t.platform.db('events').where({ source_id: s.sourceId }))).toBe(cases.length);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);

    // Next run, the provider makes sense again: every one of them is retried and reconciled.
    for (const [m] of cases) s.provider.answer(m, status(m, 'delivered'));
    await t.platform.db('messages').where({ source_id: s.sourceId }).update({ reconciled_at: t.platform.db.raw("now() - interval '1 hour'") });
    expect(await runOnce()).toEqual({ ...noPolls, changed: cases.length });
    for (const [m] of cases) expect(await s.messageStatus(m), m).toBe('delivered');
    await eventually(async () => s.r.delivered().size === 2 * cases.length, 'reconciled statuses forwarded');
  });
});

describe('bounded work per run', () => {
  it('polls at most batchSize messages per run, the never-polled first, the rest on later runs', async () => {
    const s = await setup();
    const ids = ['b-1', 'b-2', 'b-3', 'b-4', 'b-5', 'b-6', 'b-7'];
    for (const m of ids) {
      expect((await s.callback(m, 'sent')).body.status).toBe('accepted');
      s.provider.answer(m, status(m, 'sent'));
    }
    await s.makeDue(...ids);
    // A reconciler like the platform's, with a batch of 3 and a long interval (so a message polled
    // once is not due again during this test), on the platform's database and intake path.
    const client = createDeliveryClient({ allowPrivateTargets: true, connectTimeoutMs: 1_000, attemptTimeoutMs: 1_000, maxResponseBytes: 16_384, excerptBytes: 16_384 });
    closers.push(() => client.close());
    const box = new SecretBox(t.config.secretsKey);
    const intake = new IntakeService({ db: t.platform.db, box, defaultMaxAgeSeconds: 3_600, fannedOut: (r) => t.platform.lifecycle.fannedOut(r) });
    const reconciler = new Reconciler({ db: t.platform.db, box, intake, client, logger: createLogger('silent'), intervalSeconds: 3_600, batchSize: 3, random: () => 0 });

    const runs = [];
    for (let i = 0; i < 4; i++) runs.push((await reconciler.runOnce()).unchanged);
    expect(runs).toEqual([3, 3, 1, 0]);
    expect(s.provider.requests).toHaveLength(7);
    expect(new Set(s.provider.requests.map((r) => r.path)).size).toBe(7);
    for (const m of ids) await s.callback(m, 'delivered'); // final: out of the way
  });
});

describe('the reconciliation timer', () => {
  it('runs by itself every RECONCILE_INTERVAL_SECONDS, survives garbage, and reconciles on a later run', async () => {
    const own = await startTestPlatform({ env: { RECONCILE_INTERVAL_SECONDS: '1' } });
    closers.push(() => own.stop());
    const provider = await startProvider();
    closers.push(provider.close);
    const tenant = await own.createTenant();
    const src = await tenant.call('POST', '/v1/sources', {
      body: { type: 'momo-communication', name: 'sms', reconcile: { baseUrl: provider.baseUrl, apiKey: API_KEY, afterSeconds: 10 } },
    });
    const cb = sign.communication(src.body.secret, communication.messageStatus('m-timer', 'sent'));
    expect((await postCallback(own, src.body.id, cb)).body.status).toBe('accepted');
    provider.answer('m-timer', { status: 200, body: 'not json' });
    await own.platform.db('messages').where({ message_id: 'm-timer' }).update({ updated_at: own.platform.db.raw("now() - interval '1 hour'") });

    await eventually(async () => provider.polls('m-timer') >= 1, 'polled by the timer', 10_000);
    provider.answer('m-timer', status('m-timer', 'delivered'));
    await eventually(
      async () => (await own.platform.db('messages').where({ message_id: 'm-timer' }).first('status')).status === 'delivered',
      'reconciled on a later run',
      10_000,
    );
    expect(provider.polls('m-timer')).toBeGreaterThanOrEqual(2);
    const metrics = await readMetrics(own.url);
    expect(sampleOf(metrics, POLLS, { outcome: 'changed' })).toBeGreaterThanOrEqual(1);
    expect(sampleOf(metrics, POLLS, { outcome: 'invalid_response' })).toBeGreaterThanOrEqual(1);
  });
});
