// A provider retry storm: every one of 1,000 callbacks arrives five times (re-signed each time, as
// a provider's retries are), all 5,000 shuffled and sent 50 at a time, so copies of one event race
// each other through intake. One logical event per provider event, one receipt per request, one
// delivery per (event, endpoint), and every delivery arrives.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, countRows, deliveryStatuses, expectAcknowledgedStored, mapConcurrent, measured, seededRandom, shuffle } from '../helpers/chaos.js';
import { createEndpoint } from '../helpers/dispatch.js';
import { request } from '../helpers/http.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

const EVENTS = 1_000;
const COPIES = 5;
const CONCURRENCY = 50;

describe('provider retry burst', () => {
  let t: TestPlatform;
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    t = await startTestPlatform();
    receivers.push(await startReceiver(), await startReceiver());
  });
  afterAll(async () => {
    for (const r of receivers) await r.close();
    await t?.stop();
  });

  it(`${COPIES} copies of ${EVENTS} callbacks, shuffled and concurrent: ${EVENTS} events, ${EVENTS * COPIES} receipts, ${EVENTS} deliveries per endpoint`, { timeout: 180_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    const endpoints = [];
    for (const r of receivers) endpoints.push((await createEndpoint(tenant, { url: `${r.url}/hook`, maxConcurrency: 20 })).id);

    const bodies = Array.from({ length: EVENTS }, (_, i) => automation.body(randomUUID(), 'order.created', 'sub_1', { i }));
    const sends = shuffle(bodies.flatMap((body, i) => Array.from({ length: COPIES }, () => ({ body, i }))), seededRandom('retry-burst'));
    const started = Date.now();
    const answers = await mapConcurrent(sends, CONCURRENCY, async ({ body, i }) => {
      const res = await request(t.url, 'POST', `/inbound/${source.id}`, { rawBody: body, headers: automation.headers(source.secret, body) });
      return { i, status: res.status, text: res.text, body: res.body as { status: string; eventId: string; receiptId: string } };
    });
    const intakeMs = Date.now() - started;

    // Every copy is acknowledged; exactly one per provider event is the accepted one, and every
    // copy names the same event.
    expect(answers.filter((a) => a.status !== 200).map((a) => `${a.status} ${a.text}`)).toEqual([]);
    expect(answers.filter((a) => a.body.status === 'accepted')).toHaveLength(EVENTS);
    expect(answers.filter((a) => a.body.status === 'duplicate')).toHaveLength(EVENTS * (COPIES - 1));
    const eventOf = new Map<number, Set<string>>();
    for (const a of answers) eventOf.set(a.i, (eventOf.get(a.i) ?? new Set()).add(a.body.eventId));
    expect([...eventOf.values()].filter((ids) => ids.size !== 1)).toEqual([]);
    expect(new Set(answers.map((a) => a.body.eventId)).size).toBe(EVENTS);

    await expectAcknowledgedStored(t.platform.db, answers.map((a) => a.body));
    expect(await countRows(t.platform.db, 'events')).toBe(EVENTS);
    expect(await countRows(t.platform.db, 'receipts')).toBe(EVENTS * COPIES);
    await eventually(() => allSettled(t.platform.db, EVENTS * endpoints.length), 'every delivery settled', 120_000, 250);
    const settledMs = Date.now() - started;
    for (const id of endpoints) expect(await deliveryStatuses(t.platform.db, id)).toEqual({ succeeded: EVENTS });

    const stats = await expectNoViolations({ db: t.platform.db, receivers, metricsText: [await metricsOf(t.url)] });
    measured('retry-burst', {
      requests: sends.length,
      intakeMs,
      intakePerSecond: Math.round(sends.length / (intakeMs / 1000)),
      duplicateReceipts: await countRows(t.platform.db, 'receipts', { outcome: 'duplicate' }),
      msToAllDelivered: settledMs,
      redeliveries: stats.redeliveries,
      // With an instant receiver, redeliveries can only come from attempts that timed out while
      // this one process (sender, platform and receivers) was saturated; each is a recorded attempt.
      attemptTimeouts: await countRows(t.platform.db, 'attempts', { error_class: 'attempt_timeout' }),
    });
  });
});
