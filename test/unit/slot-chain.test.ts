import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import type { AttemptRecord, ClaimedDelivery, DeliveryLifecycle } from '../../src/delivery/index.js';
import { SecretBox } from '../../src/domain/secret-box.js';
import { generateSigningSecret } from '../../src/domain/signing.js';
import { runSlot, type DeliverDeps } from '../../src/outbound/deliver.js';
import { EndpointHeaders } from '../../src/outbound/endpoint-headers.js';
import type { DeliveryClient } from '../../src/outbound/http-client.js';

/**
 * A slot hands itself on to its endpoint's next delivery after each result, but not for ever: after
 * 5 s its endpoint goes back through admission, which may give the slot to another worker process.
 */
describe('a chain of slot hand-offs', () => {
  const box = new SecretBox(randomBytes(32));
  const secret = box.seal(generateSigningSecret('hmac').secret, 'ep_1');
  let clockMs = Date.parse('2026-12-04T12:00:00Z');
  let n = 0;
  const claimed = (): ClaimedDelivery => ({
    id: `dlv_${++n}`,
    tenant_id: 'ten_1',
    status: 'in_flight',
    attempt_count: 1,
    attempt_base: 0,
    lease_token: n,
    replayed_at: null,
    next_trigger: 'initial',
    deadline_at: new Date(clockMs + 86_400_000),
    succeeded_at: null,
    event_id: `evt_${n}`,
    event_type: 'order.created',
    event_created_at: new Date(clockMs),
    body: '{"id":"evt","type":"order.created","data":{}}',
    event_trace_parent: null,
    trace_parent: null,
    endpoint: { id: 'ep_1', url: 'https://receiver.example/hook', status: 'active', retry_policy: {}, secret_enc: secret, previous_secret_enc: null, previous_secret_expires_at: null, deleted_at: null },
  });

  /** A slot's dependencies around a scripted `record` and `send`. */
  const slotDeps = (record: (a: AttemptRecord, handOffLeaseMs?: number) => Promise<unknown>, send: DeliveryClient['send'], extra: Partial<DeliverDeps> = {}): DeliverDeps => ({
    lifecycle: { record: vi.fn(record), announce: vi.fn(async () => undefined) } as unknown as DeliveryLifecycle,
    box,
    client: { send, close: async () => undefined },
    logger: pino({ level: 'silent' }),
    defaults: { maxAttempts: 5, baseDelayMs: 1_000, maxDelayMs: 60_000, maxEventAgeSeconds: 86_400, retryAfterMaxSeconds: 3_600 },
    inFlightLeaseMs: 30_000,
    circuitFailureThreshold: 5,
    now: () => new Date(clockMs),
    ...extra,
  });

  it('lets admission decide again once it has held its slot for 5 s', async () => {
    // Each answer takes a second; every record hands the slot its endpoint's next delivery when asked to.
    const handOffs: Array<number | undefined> = [];
    const deps = slotDeps(
      async (_a, handOffLeaseMs) => {
        handOffs.push(handOffLeaseMs);
        return { applied: true, next: handOffLeaseMs === undefined ? undefined : claimed() };
      },
      async () => {
        clockMs += 1_000;
        return { outcome: { kind: 'response', statusCode: 200 }, durationMs: 1_000 };
      },
      { endpointHeaders: new EndpointHeaders({ box, now: () => clockMs, read: async (_tenantId, id) => ({ id, headers_enc: null }) }) },
    );
    await runSlot(deps, claimed());
    // Results at 1, 2, 3 and 4 s hand on; the one at 5 s does not.
    expect(handOffs).toEqual([30_000, 30_000, 30_000, 30_000, undefined]);
  });

  it('starts a handed-off delivery only after what else was ready in the event loop', async () => {
    // A record that hands on also lets another tenant's work become ready (a socket read, here a
    // setImmediate): that work must not wait behind the next attempt, nor behind every other slot's.
    const order: string[] = [];
    let records = 0;
    const deps = slotDeps(
      async () => {
        records++;
        setImmediate(() => order.push('other work'));
        return { applied: true, next: records < 3 ? claimed() : undefined };
      },
      async () => {
        order.push('attempt');
        return { outcome: { kind: 'response', statusCode: 200 }, durationMs: 1 };
      },
    );
    await runSlot(deps, claimed());
    await new Promise((resolve) => setImmediate(resolve));
    expect(order).toEqual(['attempt', 'other work', 'attempt', 'other work', 'attempt', 'other work']);
  });
});
