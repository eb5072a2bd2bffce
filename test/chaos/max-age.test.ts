// A customer endpoint is down (its port refuses connections) for longer than its events may live
// (retryPolicy.maxEventAgeSeconds = 3): every delivery ends dead with reason `max_age`, nothing is
// dropped silently. Then the customer's server comes back on the same port and one bulk replay
// (filter reason max_age) delivers them all, as the same events: same webhook-id, same body.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, deliveryStatuses, mapConcurrent, measured, sendUntilAccepted, signed } from '../helpers/chaos.js';
import { closedPort, metricValue } from '../helpers/dispatch.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

const EVENTS = 30;

describe('endpoint down until max age, then back', () => {
  let t: TestPlatform;
  let receiver: Receiver | undefined;

  beforeAll(async () => {
    // The circuit breaker opens after 10 refused attempts; a 1 s cooldown (30 s by default) keeps
    // the scenario short without changing what it shows.
    t = await startTestPlatform({ env: { CIRCUIT_COOLDOWN_SECONDS: '1' } });
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  it('all dead with reason max_age, and one bulk replay delivers every one', { timeout: 90_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    const port = await closedPort();
    const ep = await tenant.call('POST', '/v1/endpoints', { body: { url: `http://127.0.0.1:${port}/hook`, retryPolicy: { maxEventAgeSeconds: 3 } } });
    expect(ep.status, ep.text).toBe(201);
    const answers = await mapConcurrent(Array.from({ length: EVENTS }, (_, i) => i), 10, (i) =>
      sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, automation.body(randomUUID(), 'order.created', 'sub_1', { i }))),
    );
    const eventIds = new Set(answers.map((a) => a.eventId));

    await eventually(() => allSettled(t.platform.db, EVENTS), 'every delivery settled', 30_000, 100);
    const dead = await t.platform.db('deliveries').select('status', 'dead_reason', 'attempt_count');
    expect(dead.map((d) => [d.status, d.dead_reason])).toEqual(Array.from({ length: EVENTS }, () => ['dead', 'max_age']));
    // The endpoint was really tried and refused; once its circuit opened (10 refusals) the rest
    // waited in PostgreSQL, unsent, until the sweeper dead-lettered them at their deadline.
    expect(dead.some((d) => d.attempt_count >= 1)).toBe(true);
    // Refused, every one (a connect timeout is the same refusal seen by a saturated event loop).
    const tries: Array<{ error_class: string; status_code: number | null }> = await attemptsListed(t.platform.db).select('error_class', 'status_code');
    expect(tries.some((a) => a.error_class === 'connection_refused')).toBe(true);
    for (const a of tries) expect(['connection_refused', 'connect_timeout']).toContain(a.error_class);
    expect(tries.every((a) => a.status_code === null)).toBe(true);
    const before = await metricsOf(t.url);
    expect(metricValue(before, 'webhook_deliveries_dead_lettered_total', { reason: 'max_age' })).toBe(EVENTS);
    const attemptsBeforeReplay = (await attemptsListed(t.platform.db).count<{ n: number }[]>('* as n'))[0]!.n;

    // The customer's server is back where the endpoint points.
    receiver = await startReceiver(undefined, { port });
    const dry = await tenant.call('POST', '/v1/replays', { body: { filter: { reason: 'max_age' }, reason: 'endpoint back after outage', dryRun: true } });
    expect(dry.status, dry.text).toBe(200);
    expect(dry.body).toMatchObject({ dryRun: true, count: EVENTS });
    const replay = await tenant.call('POST', '/v1/replays', { body: { filter: { reason: 'max_age' }, reason: 'endpoint back after outage' } });
    expect(replay.status, replay.text).toBe(202);
    expect(replay.body).toMatchObject({ dryRun: false, count: EVENTS });
    const replayedAt = Date.now();
    const progress = await eventually(
      async () => {
        const p = await tenant.call('GET', `/v1/replays/${replay.body.id}`);
        return p.body.status === 'completed' && p.body;
      },
      'replay completed',
      30_000,
      100,
    );
    const replayMs = Date.now() - replayedAt;
    expect(progress).toMatchObject({ total: EVENTS, done: EVENTS, failed: 0 });
    expect(await deliveryStatuses(t.platform.db)).toEqual({ succeeded: EVENTS });

    // The same events, marked as a replay.
    expect(receiver.eventIds()).toEqual(eventIds);
    expect(receiver.requests.every((r) => r.headers['webhook-replay'] === 'true')).toBe(true);
    const stats = await expectNoViolations({ db: t.platform.db, receivers: [receiver], metricsText: [await metricsOf(t.url)] });
    measured('max-age', {
      events: EVENTS,
      attemptsWhileDown: attemptsBeforeReplay,
      replayMsToAllDelivered: replayMs,
      requestsAfterReplay: stats.requests,
      redeliveries: stats.redeliveries,
    });
  });
});
