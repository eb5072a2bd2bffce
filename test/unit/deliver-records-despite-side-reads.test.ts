import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import type { AttemptRecord, ClaimedDelivery, DeliveryLifecycle } from '../../src/delivery/index.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { generateSigningSecret } from '../../src/domain/signing.js';
import { runSlot, type DeliverDeps } from '../../src/outbound/deliver.js';
import { EndpointHeaders } from '../../src/outbound/endpoint-headers.js';
import type { DeliveryClient } from '../../src/outbound/http-client.js';
import { renderMetrics } from '../../src/metrics/registry.js';
import { metricValue } from '../helpers/dispatch.js';

const firstAttemptSamples = async () => metricValue((await renderMetrics()).body, 'webhook_first_attempt_delay_seconds_count');

/**
 * What an attempt does besides sending and recording (reading the endpoint's state for the latency
 * objective, disabling an endpoint that answered 410) must not cost the record: the receiver has
 * answered, and an unrecorded answer is sent again once the lease runs out.
 */
describe('an attempt whose side steps fail is still recorded', () => {
  const box = new SecretBox(randomBytes(32));
  const claimed = (): ClaimedDelivery => ({
    id: 'dlv_1',
    tenant_id: 'ten_1',
    status: 'in_flight',
    attempt_count: 1,
    attempt_base: 0,
    lease_token: 1764892800000000,
    replayed_at: null,
    next_trigger: 'initial',
    deadline_at: new Date(Date.now() + 86_400_000),
    succeeded_at: null,
    event_id: 'evt_1',
    event_type: 'order.created',
    // An hour late: a first attempt this late asks for the endpoint's state (src/domain/slo.ts).
    event_created_at: new Date(Date.now() - 3_600_000),
    body: '{"id":"evt_1"}',
    event_trace_parent: null,
    trace_parent: null,
    endpoint: {
      id: 'ep_1',
      url: 'https://receiver.example/hook',
      status: 'active',
      retry_policy: {},
      secret_enc: box.seal(generateSigningSecret('hmac').secret, 'ep_1'),
      previous_secret_enc: null,
      previous_secret_expires_at: null,
      deleted_at: null,
    },
  });

  function setUp(statusCode: number) {
    const recorded: AttemptRecord[] = [];
    const lifecycle = {
      record: vi.fn(async (a: AttemptRecord) => (recorded.push(a), { applied: true, next: undefined })),
      disableGoneEndpoint: vi.fn(async () => {
        throw new Error('timeout acquiring a connection');
      }),
      announce: vi.fn(async () => undefined),
    };
    let reads = 0;
    let clockMs = Date.now() - 100;
    // The endpoint was read a moment before the attempt (a previous attempt's read, still fresh);
    // every later read, the one the objective asks for after the attempt started, fails.
    const endpointHeaders = new EndpointHeaders({
      box,
      now: () => clockMs,
      read: async (_tenantId, id) => {
        if (++reads > 1) throw new Error('timeout acquiring a connection');
        return { id, headers_enc: null };
      },
    });
    const warm = endpointHeaders.settings('ten_1', 'ep_1').then(() => void (clockMs = Date.now()));
    const client: DeliveryClient = { send: async () => ({ outcome: { kind: 'response', statusCode }, durationMs: 3 }), close: async () => undefined };
    const beside: Array<Promise<void>> = [];
    const deps: DeliverDeps = {
      lifecycle: lifecycle as unknown as DeliveryLifecycle,
      box,
      client,
      endpointHeaders,
      logger: pino({ level: 'silent' }),
      defaults: { maxAttempts: 5, baseDelayMs: 1_000, maxDelayMs: 60_000, maxEventAgeSeconds: 86_400, retryAfterMaxSeconds: 3_600 },
      inFlightLeaseMs: 30_000,
      circuitFailureThreshold: 5,
      track: (work) => void beside.push(work),
    };
    return { deps, recorded, lifecycle, warm, beside, readCount: () => reads };
  }

  it('records a late first success whose state read for the objective failed, and counts it', async () => {
    const { deps, recorded, warm, beside, readCount } = setUp(200);
    await warm;
    const sampledBefore = await firstAttemptSamples();
    await runSlot(deps, claimed());
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ deliveryId: 'dlv_1', attemptNumber: 1, outcome: 'success', statusCode: 200, next: { status: 'succeeded' } });
    expect(beside).toHaveLength(1);
    await Promise.all(beside);
    expect(readCount()).toBe(2);
    expect(await firstAttemptSamples()).toBe(sampledBefore + 1);
  });

  it('records a 410 as dead although disabling its endpoint failed', async () => {
    const { deps, recorded, lifecycle, warm } = setUp(410);
    await warm;
    await runSlot(deps, claimed());
    expect(lifecycle.disableGoneEndpoint).toHaveBeenCalledTimes(1);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ outcome: 'terminal', statusCode: 410, next: { status: 'dead' } });
  });
});
