// A receiver that processes a request and then answers too late (after the platform's attempt
// timeout) has done the work, but the platform cannot know: it must retry, and the retry must be
// recognisable as the same event: same webhook-id, same delivery, byte-identical body, valid
// signature. This is the case receivers dedupe on webhook-id for.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allSettled, mapConcurrent, measured, sendUntilAccepted, signed } from '../helpers/chaos.js';
import { createEndpoint } from '../helpers/dispatch.js';
import { createSource } from '../helpers/intake.js';
import { expectNoViolations, metricsOf } from '../helpers/invariants.js';
import { eventually, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { automation } from '../helpers/providers.js';
import { startReceiver, type ReceivedRequest, type Receiver } from '../helpers/receiver.js';
import { attemptsListed } from '../helpers/database.js';

const EVENTS = 20;
const ATTEMPT_TIMEOUT_MS = 1_000;

describe('receiver that times out after processing', () => {
  let t: TestPlatform;
  let receiver: Receiver;
  /** Event ids the receiver has processed (its side effect happened), in order. */
  const processed: string[] = [];

  beforeAll(async () => {
    // Twenty timeouts in a row would open the endpoint's circuit (30 s cooldown): right for a
    // struggling endpoint, beside the point here, so the threshold is out of reach.
    t = await startTestPlatform({ env: { ATTEMPT_TIMEOUT_MS: String(ATTEMPT_TIMEOUT_MS), CIRCUIT_FAILURE_THRESHOLD: '1000' } });
    // First sight of an event: do the work, then answer 2.5× the attempt timeout later (the
    // platform has given up by then). Any later request for it is answered at once.
    receiver = await startReceiver((req: ReceivedRequest, res: ServerResponse) => {
      const id = String(req.headers['webhook-id']);
      const first = !processed.includes(id);
      if (first) processed.push(id);
      setTimeout(() => res.writeHead(200).end(), first ? ATTEMPT_TIMEOUT_MS * 2.5 : 0);
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.stop();
  });

  it('gets a retry with the same webhook-id, delivery id and identical body', { timeout: 60_000 }, async () => {
    const tenant = await t.createTenant();
    const source = await createSource(tenant, 'momo-automation');
    const endpoint = await createEndpoint(tenant, { url: `${receiver.url}/hook` });
    const answers = await mapConcurrent(Array.from({ length: EVENTS }, (_, i) => i), 5, (i) =>
      sendUntilAccepted(() => t.url, source.id, signed.automation(source.secret, automation.body(randomUUID(), 'order.created', 'sub_1', { i }))),
    );
    await eventually(() => allSettled(t.platform.db, EVENTS), 'every delivery settled', 40_000, 100);

    const wh = new Webhook(endpoint.secret);
    for (const { eventId } of answers) {
      const requests = receiver.requests.filter((r) => r.headers['webhook-id'] === eventId);
      expect(requests.length).toBeGreaterThanOrEqual(2);
      const [first, retry] = requests as [ReceivedRequest, ReceivedRequest];
      expect(retry.headers['webhook-delivery-id']).toBe(first.headers['webhook-delivery-id']);
      expect(Buffer.from(retry.body).equals(Buffer.from(first.body))).toBe(true);
      expect([first.headers['webhook-attempt'], retry.headers['webhook-attempt']]).toEqual(['1', '2']);
      // Each try is signed for its own timestamp, and both verify.
      for (const r of [first, retry]) {
        expect(() =>
          wh.verify(r.body, { 'webhook-id': eventId, 'webhook-timestamp': String(r.headers['webhook-timestamp']), 'webhook-signature': String(r.headers['webhook-signature']) }),
        ).not.toThrow();
      }
    }
    // The platform's record says why it retried: the first try timed out.
    const firstAttempts = await attemptsListed(t.platform.db).where({ attempt_number: 1 }).select('outcome', 'error_class', 'status_code');
    expect(firstAttempts).toHaveLength(EVENTS);
    for (const a of firstAttempts) expect(a).toEqual({ outcome: 'retry', error_class: 'attempt_timeout', status_code: null });

    const stats = await expectNoViolations({ db: t.platform.db, receivers: [receiver], metricsText: [await metricsOf(t.url)] });
    expect(stats.redeliveries).toBeGreaterThanOrEqual(EVENTS);
    measured('receiver-timeout', { events: EVENTS, requests: stats.requests, redeliveries: stats.redeliveries });
  });
});
