/**
 * The metric names, label names and label values are an external contract (CONTRACT.md, "Metrics"):
 * the dashboards and alert rules in grafana/ query them by name. These tests pin them.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import {
  ATTEMPT_OUTCOMES,
  DEAD_LETTER_REASONS,
  RECEIPT_OUTCOMES,
  RECONCILE_OUTCOMES,
  REPLAY_KINDS,
  SOURCE_TYPES,
  STATUS_CLASSES,
  metrics,
  registry,
  resetMetrics,
  setBacklogSource,
  statusClass,
  type BacklogSnapshot,
} from '../../src/metrics/registry.js';

type MetricJson = Awaited<ReturnType<typeof registry.getMetricsAsJSON>>[number];

async function metric(name: string): Promise<MetricJson> {
  const found = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  if (!found) throw new Error(`metric ${name} is not registered`);
  return found;
}

/** Value of one series of a gauge or counter, read through a full scrape like Prometheus does. */
async function scrapeValue(name: string, labels = ''): Promise<number | undefined> {
  const text = await registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

function labelSets(m: MetricJson): string[] {
  return m.values.map((v) => JSON.stringify(Object.entries(v.labels).sort()));
}

function cross(dimensions: Record<string, readonly string[]>): string[] {
  let sets: Record<string, string>[] = [{}];
  for (const [label, values] of Object.entries(dimensions)) {
    sets = sets.flatMap((s) => values.map((v) => ({ ...s, [label]: v })));
  }
  return sets.map((s) => JSON.stringify(Object.entries(s).sort()));
}

const snapshot = (n: number): BacklogSnapshot => ({
  backlog: n,
  deadLetters: n + 1,
  oldestPendingAgeSeconds: n + 2,
  openCircuits: n + 3,
  pausedEndpoints: n + 4,
});

beforeEach(() => resetMetrics());
afterEach(() => {
  setBacklogSource(undefined);
  vi.useRealTimers();
});

describe('metric names and label sets', () => {
  it('label values are exactly the contract values', () => {
    expect(RECEIPT_OUTCOMES).toEqual([
      'accepted',
      'duplicate',
      'stale',
      'rejected_signature',
      'rejected_malformed',
      'unavailable',
    ]);
    expect(ATTEMPT_OUTCOMES).toEqual(['success', 'retry', 'terminal']);
    expect(STATUS_CLASSES).toEqual(['2xx', '3xx', '4xx', '5xx', 'network']);
    expect(DEAD_LETTER_REASONS).toEqual(['max_attempts', 'max_age', 'terminal', 'endpoint_disabled', 'endpoint_deleted']);
    expect(REPLAY_KINDS).toEqual(['single', 'bulk']);
    expect(RECONCILE_OUTCOMES).toEqual(['changed', 'unchanged', 'provider_error', 'invalid_response']);
    expect(SOURCE_TYPES).toEqual(['momo-communication', 'momo-automation', 'standard-webhooks', 'stripe', 'github', 'shopify', 'hmac']);
  });

  // Counters start with every label combination at 0, so the whole label space is visible.
  it.each([
    ['webhook_inbound_receipts_total', { source_type: SOURCE_TYPES, outcome: RECEIPT_OUTCOMES }],
    ['webhook_delivery_attempts_total', { outcome: ATTEMPT_OUTCOMES, status_class: STATUS_CLASSES }],
    ['webhook_deliveries_dead_lettered_total', { reason: DEAD_LETTER_REASONS }],
    ['webhook_replays_total', { kind: REPLAY_KINDS }],
    ['webhook_reconcile_polls_total', { outcome: RECONCILE_OUTCOMES }],
  ] as const)('counter %s has exactly the contract label set, initialised at 0', async (name, dims) => {
    const m = await metric(name);
    expect(m.type).toBe('counter');
    expect(labelSets(m).sort()).toEqual(cross(dims).sort());
    expect(m.values.every((v) => v.value === 0)).toBe(true);
  });

  it.each([
    ['webhook_inbound_ack_seconds', ['outcome', 'source_type']],
    ['webhook_attempt_duration_seconds', ['status_class']],
    ['webhook_delivery_latency_seconds', []],
    ['webhook_first_attempt_delay_seconds', []],
  ] as const)('histogram %s carries labels %j', async (name, labels) => {
    const m = await metric(name);
    expect(m.type).toBe('histogram');
    // Histograms are not pre-initialised; record one observation to see the label names.
    if (name === 'webhook_inbound_ack_seconds') {
      metrics.inboundAck.observe({ source_type: 'standard-webhooks', outcome: 'accepted' }, 0.004);
    } else if (name === 'webhook_attempt_duration_seconds') {
      metrics.attemptDuration.observe({ status_class: '5xx' }, 0.2);
    } else if (name === 'webhook_first_attempt_delay_seconds') {
      metrics.firstAttemptDelay.observe(0.3);
    } else {
      metrics.deliveryLatency.observe(12);
    }
    const after = await metric(name);
    const keys = new Set(after.values.flatMap((v) => Object.keys(v.labels).filter((k) => k !== 'le')));
    expect([...keys].sort()).toEqual([...labels]);
  });

  it('histogram buckets fit their range: ack in ms, attempts up to 60 s, delivery latency up to hours', async () => {
    const buckets = async (name: string) => {
      const text = await registry.metrics();
      return [...text.matchAll(new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"`, 'gm'))]
        .map((m) => m[1])
        .filter((le) => le !== '+Inf')
        .map(Number);
    };
    metrics.inboundAck.observe({ source_type: 'momo-automation', outcome: 'duplicate' }, 0.002);
    metrics.attemptDuration.observe({ status_class: '2xx' }, 0.05);
    metrics.deliveryLatency.observe(0.5);
    const ack = await buckets('webhook_inbound_ack_seconds');
    expect(Math.min(...ack)).toBeLessThanOrEqual(0.001);
    expect(Math.max(...ack)).toBeLessThanOrEqual(5);
    const attempt = await buckets('webhook_attempt_duration_seconds');
    expect(Math.min(...attempt)).toBeLessThanOrEqual(0.005);
    expect(Math.max(...attempt)).toBeGreaterThanOrEqual(60);
    const latency = await buckets('webhook_delivery_latency_seconds');
    expect(Math.min(...latency)).toBeLessThanOrEqual(0.01);
    expect(Math.max(...latency)).toBeGreaterThanOrEqual(3 * 3600);
  });

  it('the first-attempt delay has a bucket at the 5 s objective, so its good share is exact', async () => {
    metrics.firstAttemptDelay.observe(4.9);
    metrics.firstAttemptDelay.observe(5);
    metrics.firstAttemptDelay.observe(5.1);
    const text = await registry.metrics();
    const bucket = (le: string) => Number(text.match(new RegExp(`^webhook_first_attempt_delay_seconds_bucket\\{le="${le}"\\} (\\S+)$`, 'm'))?.[1]);
    expect(bucket('5')).toBe(2);
    expect(bucket('\\+Inf')).toBe(3);
  });

  it('global gauges exist, unlabelled', async () => {
    for (const name of [
      'webhook_dispatch_backlog',
      'webhook_dead_letter_deliveries',
      'webhook_oldest_pending_age_seconds',
      'webhook_open_circuits',
    ]) {
      const m = await metric(name);
      expect(m.type).toBe('gauge');
      expect(m.values.every((v) => Object.keys(v.labels).length === 0)).toBe(true);
    }
  });

  it('includes the process default metrics', async () => {
    const text = await registry.metrics();
    expect(text).toMatch(/^process_cpu_user_seconds_total /m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes /m);
    // Removed because promtool check metrics rejects a gauge named *_total.
    expect(text).not.toMatch(/^nodejs_active_handles_total /m);
  });

  it('records through the typed API', async () => {
    metrics.inboundReceipts.inc({ source_type: 'momo-communication', outcome: 'stale' });
    metrics.deliveryAttempts.inc({ outcome: 'retry', status_class: statusClass(503) }, 2);
    metrics.deadLettered.inc({ reason: 'max_age' });
    metrics.replays.inc({ kind: 'bulk' }, 5);
    metrics.reconcilePolls.inc({ outcome: 'changed' });
    const stop = metrics.inboundAck.startTimer();
    expect(stop({ source_type: 'momo-communication', outcome: 'accepted' })).toBeGreaterThanOrEqual(0);

    expect(await scrapeValue('webhook_inbound_receipts_total', '{source_type="momo-communication",outcome="stale"}')).toBe(1);
    expect(await scrapeValue('webhook_delivery_attempts_total', '{outcome="retry",status_class="5xx"}')).toBe(2);
    expect(await scrapeValue('webhook_deliveries_dead_lettered_total', '{reason="max_age"}')).toBe(1);
    expect(await scrapeValue('webhook_replays_total', '{kind="bulk"}')).toBe(5);
    expect(await scrapeValue('webhook_reconcile_polls_total', '{outcome="changed"}')).toBe(1);
    expect(
      await scrapeValue('webhook_inbound_ack_seconds_count', '{source_type="momo-communication",outcome="accepted"}'),
    ).toBe(1);
  });
});

describe('global gauges from the injected source', () => {
  it('report 0 until a source is set', async () => {
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(0);
  });

  it('read every gauge from one source call per scrape', async () => {
    const source = vi.fn(async () => snapshot(10));
    setBacklogSource(source);
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(10);
    const text = await registry.metrics();
    expect(text).toMatch(/^webhook_dead_letter_deliveries 11$/m);
    expect(text).toMatch(/^webhook_oldest_pending_age_seconds 12$/m);
    expect(text).toMatch(/^webhook_open_circuits 13$/m);
    // Two scrapes within the TTL: one query.
    expect(source).toHaveBeenCalledTimes(1);
  });

  it('concurrent scrapes share one in-flight query', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const source = vi.fn(async () => {
      await gate;
      return snapshot(3);
    });
    setBacklogSource(source);
    const scrapes = Promise.all([registry.metrics(), registry.metrics(), registry.metrics()]);
    release();
    for (const text of await scrapes) expect(text).toMatch(/^webhook_dispatch_backlog 3$/m);
    expect(source).toHaveBeenCalledTimes(1);
  });

  it('queries again after the TTL', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    let n = 0;
    setBacklogSource(async () => snapshot(++n), { ttlMs: 2_000 });
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(1);
    vi.advanceTimersByTime(1_000);
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(1);
    vi.advanceTimersByTime(1_500);
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(2);
  });

  it('keep the last values when the source fails, and report the error', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const errors: unknown[] = [];
    let fail = false;
    setBacklogSource(
      async () => {
        if (fail) throw new Error('database down');
        return snapshot(7);
      },
      { onError: (e) => errors.push(e) },
    );
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(7);
    fail = true;
    vi.advanceTimersByTime(5_000);
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(7);
    expect(await scrapeValue('webhook_open_circuits')).toBe(10);
    expect(errors.length).toBeGreaterThan(0);
  });

  it('a source that throws synchronously or hangs does not break the scrape', async () => {
    setBacklogSource(() => {
      throw new Error('sync failure');
    });
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(0);

    const errors: unknown[] = [];
    setBacklogSource(() => new Promise<BacklogSnapshot>(() => {}), { timeoutMs: 50, onError: (e) => errors.push(e) });
    expect(await scrapeValue('webhook_dispatch_backlog')).toBe(0);
    expect(String(errors[0])).toMatch(/timed out/);
  });
});

describe('statusClass', () => {
  it.each([
    [200, '2xx'],
    [204, '2xx'],
    [299, '2xx'],
    [301, '3xx'],
    [399, '3xx'],
    [400, '4xx'],
    [410, '4xx'],
    [429, '4xx'],
    [499, '4xx'],
    [500, '5xx'],
    [503, '5xx'],
    [599, '5xx'],
    [undefined, 'network'],
    [null, 'network'],
    [0, 'network'],
    [101, 'network'],
    [600, 'network'],
    [200.5, 'network'],
    [Number.NaN, 'network'],
  ] as const)('%s → %s', (code, expected) => {
    expect(statusClass(code)).toBe(expected);
  });
});

// Compile-time checks (`npm run typecheck`): a label value outside the contract does not compile.
// Never called; an unused @ts-expect-error would itself fail the typecheck.
export function labelTypeChecks(): void {
  // @ts-expect-error 'rejected_too_large' is not a contract outcome (a 413 is rejected_malformed)
  metrics.inboundReceipts.inc({ source_type: 'momo-automation', outcome: 'rejected_too_large' });
  // @ts-expect-error status_class is bounded: no raw status codes
  metrics.deliveryAttempts.inc({ outcome: 'success', status_class: '204' });
  // @ts-expect-error no tenant, endpoint or id labels
  metrics.deadLettered.inc({ reason: 'terminal', endpoint_id: 'ep_1' });
  // @ts-expect-error every label is required
  metrics.deliveryAttempts.inc({ outcome: 'retry' });
}
