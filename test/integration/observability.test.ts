/**
 * The SRE's view, end to end: the api role in this process, a worker in its own process, and a
 * real Prometheus scraping both every second with the alert rules loaded. Real callbacks and real
 * customer endpoints produce every kind of traffic; then every dashboard panel's query must return
 * data, the counters must equal what clients were told and what the database holds, the global
 * gauges must be the same global value on both processes, the rules must evaluate, and both
 * processes' /metrics must pass `promtool check metrics`.
 *
 * Each process has its own prom-client registry, which is why the worker runs as a child process:
 * it is the only way to see two sets of per-process counters that Prometheus has to aggregate.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { uuidOf } from '../../src/domain/ids.js';
import type { SourceType } from '../../src/domain/sources.js';
import { METRIC_NAMES, RECEIPT_OUTCOMES, SOURCE_TYPES } from '../../src/metrics/registry.js';
import { attemptsListed, createTestDatabase, type TestDatabase } from '../helpers/database.js';
import { createEndpoint, publish, settledDelivery, startWorkerProcess, type WorkerProcess } from '../helpers/dispatch.js';
import { createSource, type TestSource } from '../helpers/intake.js';
import { backgroundTraffic, endpointBehaviour, InboundTally, oversized, TYPES } from '../helpers/observability-traffic.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { dashboardExpressions, findBinary, startPrometheus, type PrometheusInstance, type Sample } from '../helpers/prometheus.js';
import { aggregationsOf } from '../helpers/promql-aggregation.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { UNFINISHED_STATUSES } from '../../src/domain/delivery-status.js';

const RULE_FILES = ['grafana/prometheus/alerts.yml', 'grafana/prometheus/slo.yml'];
const GLOBAL_GAUGES = [METRIC_NAMES.dispatchBacklog, METRIC_NAMES.deadLetterDeliveries, METRIC_NAMES.oldestPendingAge, METRIC_NAMES.openCircuits];
/** Every rule of every rule file, alerts and recordings, by the name Prometheus lists it under. */
const alertRules = (): Array<{ alert: string; expr: string }> =>
  RULE_FILES.flatMap((file) =>
    (parse(readFileSync(file, 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string; record?: string; expr: string }> }> }).groups
      .flatMap((g) => g.rules)
      .map((r) => ({ alert: r.alert ?? r.record ?? '', expr: r.expr })),
  );

/** Samples keyed by the values of `labels`, e.g. `momo-automation|accepted`, zeros left out. */
function byLabels(samples: Sample[], labels: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) if (s.value !== 0) out[labels.map((l) => s.metric[l] ?? '').join('|')] = s.value;
  return out;
}

const nonZero = (m: Map<string, number> | Record<string, number>) =>
  Object.fromEntries(Object.entries(m instanceof Map ? Object.fromEntries(m) : m).filter(([, v]) => v !== 0));

describe('observability: api and worker processes scraped by a real Prometheus', () => {
  let database: TestDatabase;
  let t: TestPlatform;
  let worker: WorkerProcess;
  let prom: PrometheusInstance;
  let receiver: Receiver;
  let tenant: TestTenant;
  let targets: { api: string; worker: string };
  const sources = {} as Record<SourceType, TestSource>;
  const endpoints = {} as Record<keyof typeof TYPES, string>;
  const tally = new InboundTally();
  const behaviour = endpointBehaviour();
  let traffic: ReturnType<typeof backgroundTraffic>;
  /** Deliveries that were dead-lettered (max_attempts) and then replayed to success. */
  let replayedFromDead = 0;

  beforeAll(async () => {
    // Fail (never skip) without the binaries: CI must run this.
    expect(findBinary(process.env.PROMETHEUS_BIN ?? 'prometheus'), 'apt-get install -y prometheus').toBeDefined();
    database = await createTestDatabase();
    t = await startTestPlatform({
      role: 'api',
      database,
      // A circuit opens after 5 consecutive failures and stays open for the whole test, so the
      // open-circuit gauge, the backlog and the oldest due delivery have stable non-zero values.
      env: { CIRCUIT_FAILURE_THRESHOLD: '5', CIRCUIT_COOLDOWN_SECONDS: '600' },
    });
    worker = startWorkerProcess(t);
    receiver = await startReceiver(behaviour.respond);
    tenant = await t.createTenant('observability');
    for (const type of SOURCE_TYPES) sources[type] = await createSource(tenant, type);
    const path = { ok: '/ok', flaky: '/flaky', rejected: '/rejected', gone: '/gone', max1: '/max', max2: '/max', circuit: '/circuit' } as const;
    for (const key of Object.keys(TYPES) as Array<keyof typeof TYPES>) {
      // `ok` also takes what the providers' callbacks become (message.status, order.*).
      const eventTypes = key === 'ok' ? ['message.*', 'order.*', TYPES.ok] : [TYPES[key]];
      const retryPolicy = key === 'max1' ? { maxAttempts: 1 } : key === 'max2' ? { maxAttempts: 2 } : undefined;
      endpoints[key] = (await createEndpoint(tenant, { url: `${receiver.url}${path[key]}`, eventTypes, ...(retryPolicy ? { retryPolicy } : {}) })).id;
    }

    targets = { api: `127.0.0.1:${t.platform.port}`, worker: `127.0.0.1:${await worker.port()}` };
    prom = await startPrometheus({ targets: [targets.api, targets.worker], intervalSeconds: 1, ruleFiles: RULE_FILES });
    // rate() only sees increments between two samples: let Prometheus record the starting zeros
    // of both processes before any traffic.
    await prom.waitFor('count_over_time(up[1m]) >= 2 and on (instance) up == 1', (s) => s.length === 2, 20_000);

    traffic = backgroundTraffic(t, tenant, tally, sources);
    await oversized(t, tally, sources['momo-automation']);
    await platformScenario();
  }, 80_000);

  /** One of each dead-letter reason, replays (single and bulk) and an open circuit. */
  async function platformScenario(): Promise<void> {
    const db = t.platform.db;
    // 410 Gone: dead (terminal) and the endpoint disabled; the next event's delivery is created
    // dead for endpoint_disabled.
    expect(await settledDelivery(tenant, await publish(tenant, TYPES.gone))).toMatchObject({ status: 'dead', deadReason: 'terminal', lastStatusCode: 410 });
    await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${endpoints.gone}`)).body.status === 'disabled', '410 disables the endpoint');
    expect(await settledDelivery(tenant, await publish(tenant, TYPES.gone))).toMatchObject({ status: 'dead', deadReason: 'endpoint_disabled' });

    // retryPolicy.maxAttempts 1 and 2 against an endpoint answering 500: dead after 1 and 2 attempts.
    const max1 = await Promise.all([1, 2, 3].map(() => publish(tenant, TYPES.max1)));
    const max2 = await publish(tenant, TYPES.max2);
    const dead1 = await Promise.all(max1.map((id) => settledDelivery(tenant, id)));
    for (const d of dead1) expect(d).toMatchObject({ status: 'dead', deadReason: 'max_attempts', attemptCount: 1 });
    expect(await settledDelivery(tenant, max2)).toMatchObject({ status: 'dead', deadReason: 'max_attempts', attemptCount: 2 });

    // Five failing events open the circuit; their deliveries then wait, due, behind it.
    await Promise.all([1, 2, 3, 4, 5].map(() => publish(tenant, TYPES.circuit)));
    await eventually(
      async () => (await db('endpoints').where({ id: uuidOf('endpoint', endpoints.circuit) }).where('circuit_open_until', '>', db.fn.now()).first()) !== undefined,
      'circuit open',
      15_000,
    );

    // The receiver recovers; one dead delivery is replayed alone, the other two in bulk, and a
    // delivery that already succeeded is replayed too (its second success is not a first success).
    behaviour.maxRecovers();
    const [single, ...rest] = dead1;
    expect((await tenant.call('POST', `/v1/deliveries/${single!.id}/replay`, { body: { reason: 'receiver fixed' } })).status).toBe(202);
    const bulk = await tenant.call('POST', '/v1/replays', { body: { filter: { status: 'dead', endpointId: endpoints.max1 }, reason: 'receiver fixed' } });
    expect(bulk.status, bulk.text).toBe(202);
    expect(bulk.body.count).toBe(rest.length);
    const okDelivery = await settledDelivery(tenant, await publish(tenant, TYPES.ok));
    expect(okDelivery.status).toBe('succeeded');
    expect((await tenant.call('POST', `/v1/deliveries/${okDelivery.id}/replay`, { body: { reason: 'resend' } })).status).toBe(202);
    await eventually(
      async () => (await db('deliveries').where({ endpoint_id: uuidOf('endpoint', endpoints.max1), status: 'succeeded' }).count<{ count: number }[]>('* as count'))[0]!.count === 3,
      'replayed deliveries succeeded',
      15_000,
    );
    replayedFromDead = 3;
    await eventually(async () => (await attemptsListed(db).where({ delivery_id: okDelivery.id }).count<{ count: number }[]>('* as count'))[0]!.count === 2, 'replay of a succeeded delivery sent');
  }

  let quiet: Promise<void> | undefined;
  /**
   * Stops the traffic and waits until nothing moves any more: every delivery has succeeded or
   * died, except those held behind the open circuit. Shared by the tests that compare totals.
   */
  const quiesce = () =>
    (quiet ??= (async () => {
      await traffic.stop();
      expect(traffic.errors).toEqual([]);
      const db = t.platform.db;
      await eventually(
        async () => {
          const [row] = await db('deliveries').whereIn('status', UNFINISHED_STATUSES).whereNot('endpoint_id', uuidOf('endpoint', endpoints.circuit)).count<{ count: number }[]>('* as count');
          return row!.count === 0;
        },
        'every delivery settled',
        20_000,
      );
    })());

  afterAll(async () => {
    await traffic?.stop();
    await prom?.stop();
    if (worker) {
      worker.kill('SIGTERM');
      await worker.exited;
    }
    await t?.stop();
    await receiver?.close();
    await database?.drop();
  }, 30_000);

  it('every panel of both dashboards returns data from Prometheus', async () => {
    // Traffic is still flowing here (quiesce() has not run), so every rate() window sees changes.
    const expressions = dashboardExpressions();
    expect(expressions.length).toBeGreaterThanOrEqual(20);
    const failures: string[] = [];
    await Promise.all(
      expressions.map(async (e) => {
        try {
          // A panel with data: at least one finite value. (A per-outcome breakdown may hold a
          // NaN quantile for an outcome seen once, as Grafana would show a gap for it.)
          await prom.waitFor(e.expr, (s) => s.some((x) => Number.isFinite(x.value)), 25_000);
        } catch (err) {
          failures.push(`${e.dashboard} / ${e.panel} (${e.refId}): ${(err as Error).message.split('\n')[0]}`);
        }
      }),
    );
    expect(failures).toEqual([]);
    expect(traffic.rounds()).toBeGreaterThan(0);
    // Whole-platform series are finite, not NaN: duplicate rate, latencies, retry volume.
    for (const expr of [
      'sum(rate(webhook_inbound_receipts_total{outcome=~"accepted|duplicate|stale"}[1m])) / sum(rate(webhook_inbound_receipts_total{outcome="accepted"}[1m])) > 1',
      'histogram_quantile(0.99, sum by (le) (rate(webhook_inbound_ack_seconds_bucket[1m]))) > 0',
      'histogram_quantile(0.99, sum by (le) (rate(webhook_delivery_latency_seconds_bucket[1m]))) > 0',
      'sum(rate(webhook_delivery_attempts_total{outcome="retry"}[1m])) > 0',
      'sum by (source_type) (rate(webhook_inbound_receipts_total{outcome="rejected_signature"}[1m])) > 0',
      'sum by (source_type) (rate(webhook_inbound_receipts_total{outcome="stale"}[1m])) > 0',
    ]) {
      await prom.waitFor(expr, (s) => s.length > 0, 10_000);
    }
  }, 60_000);

  it('counters summed over both processes equal what clients were told and what the database holds', async () => {
    await quiesce();
    const db = t.platform.db;
    const sums = async (expr: string, labels: string[]) => byLabels(await prom.query(expr), labels);

    // Provider chain: the tally of every answer, 413s included, by source type and outcome.
    const told = nonZero(tally.counts);
    expect(Object.keys(told).every((k) => RECEIPT_OUTCOMES.includes(k.split('|')[1] as never))).toBe(true);
    expect(told['momo-automation|rejected_malformed']).toBeGreaterThan(1); // 400s and the 413
    await expectEventually(() => sums('sum by (source_type, outcome) (webhook_inbound_receipts_total)', ['source_type', 'outcome']), told);
    expect(await sums('sum by (source_type, outcome) (webhook_inbound_ack_seconds_count)', ['source_type', 'outcome'])).toEqual(told);

    // Platform chain: attempts by outcome and status class, as recorded (in attempts or in their delivery).
    const attempts: Array<{ outcome: string; sc: string; n: number }> = await attemptsListed(db)
      .select('outcome', db.raw(`CASE WHEN status_code BETWEEN 200 AND 599 THEN (status_code / 100)::text || 'xx' ELSE 'network' END AS sc`))
      .select(db.raw('count(*)::int AS n'))
      .groupByRaw('1, 2');
    const recorded = Object.fromEntries(attempts.map((r) => [`${r.outcome}|${r.sc}`, r.n]));
    expect(Object.keys(recorded)).toEqual(expect.arrayContaining(['success|2xx', 'retry|5xx', 'terminal|4xx', 'terminal|5xx']));
    await expectEventually(() => sums('sum by (outcome, status_class) (webhook_delivery_attempts_total)', ['outcome', 'status_class']), recorded);
    const attemptTotal = Object.values(recorded).reduce((a, b) => a + b, 0);
    await expectEventually(async () => (await prom.query('sum(webhook_attempt_duration_seconds_count)'))[0]?.value, attemptTotal);

    // Delivery latency observes first successes only: one per delivery that ever succeeded, so
    // the replay of an already succeeded delivery adds nothing.
    const [{ n: firstSuccesses }] = (await db.raw<{ rows: [{ n: number }] }>(`SELECT count(*)::int AS n FROM deliveries WHERE succeeded_at IS NOT NULL`)).rows;
    expect(firstSuccesses).toBeGreaterThan(0);
    await expectEventually(async () => (await prom.query('sum(webhook_delivery_latency_seconds_count)'))[0]?.value, firstSuccesses);

    // The first-attempt delay (the delivery-latency SLI) observes each delivery's first attempt
    // once: retries and replays add nothing, deliveries never attempted (endpoint_disabled) neither.
    const [{ n: firstAttempts }] = await attemptsListed(db).where({ trigger: 'initial', attempt_number: 1 }).select(db.raw('count(*)::int AS n'));
    expect(firstAttempts).toBeGreaterThan(0);
    await expectEventually(async () => (await prom.query('sum(webhook_first_attempt_delay_seconds_count)'))[0]?.value, firstAttempts);

    // Dead letters by reason: the dead rows, plus the max_attempts ones replayed to success since.
    const { rows: dead } = await db.raw<{ rows: Array<{ dead_reason: string; n: number }> }>(
      `SELECT dead_reason, count(*)::int AS n FROM deliveries WHERE status = 'dead' GROUP BY 1`,
    );
    const expectedDead: Record<string, number> = Object.fromEntries(dead.map((r) => [r.dead_reason, r.n]));
    expectedDead.max_attempts = (expectedDead.max_attempts ?? 0) + replayedFromDead;
    expect(Object.keys(expectedDead).sort()).toEqual(['endpoint_disabled', 'max_attempts', 'terminal']);
    await expectEventually(() => sums('sum by (reason) (webhook_deliveries_dead_lettered_total)', ['reason']), expectedDead);

    // Replays: two single (a dead one and a succeeded one) and one bulk of two deliveries.
    await expectEventually(() => sums('sum by (kind) (webhook_replays_total)', ['kind']), { bulk: 2, single: 2 });
  }, 60_000);

  it('global gauges are the same on the api and the worker and match the database', async () => {
    await quiesce();
    const db = t.platform.db;
    const count = async (where: string) => (await db.raw<{ rows: [{ n: number }] }>(`SELECT count(*)::int AS n FROM ${where}`)).rows[0].n;
    const backlog = Number((await db('deliveries').whereIn('status', UNFINISHED_STATUSES).count({ n: '*' }))[0]!.n);
    const dead = await count(`deliveries WHERE status = 'dead'`);
    const open = await count(`endpoints WHERE circuit_open_until > now() AND deleted_at IS NULL`);
    // What is left: the five deliveries held behind the open circuit.
    expect({ backlog, open }).toEqual({ backlog: 5, open: 1 });
    expect(dead).toBeGreaterThan(3);

    const perInstance = (samples: Sample[]) => Object.fromEntries(samples.map((s) => [s.metric.instance, s.value]));
    const both = (value: number) => ({ [targets.api]: value, [targets.worker]: value });
    await expectEventually(async () => perInstance(await prom.query(METRIC_NAMES.dispatchBacklog)), both(backlog));
    await expectEventually(async () => perInstance(await prom.query(METRIC_NAMES.deadLetterDeliveries)), both(dead));
    await expectEventually(async () => perInstance(await prom.query(METRIC_NAMES.openCircuits)), both(open));
    // The dashboards' max() is the global value, where sum() would double it.
    expect((await prom.query(`max(${METRIC_NAMES.dispatchBacklog})`))[0]!.value).toBe(backlog);
    // The deliveries behind the circuit are due and waiting: both processes report their age.
    await expectEventually(async () => (await prom.query(`count(${METRIC_NAMES.oldestPendingAge} > 1)`))[0]?.value, 2);
  }, 30_000);

  it('loads every alert and recording rule into Prometheus and evaluates each one without error', async () => {
    const expected = alertRules().map((r) => r.alert).sort((a, b) => a.localeCompare(b));
    expect(expected.length).toBeGreaterThanOrEqual(6);
    const loaded = await eventually(
      async () => {
        const body = (await (await fetch(`${prom.url}/api/v1/rules`)).json()) as {
          data: { groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> };
        };
        const rules = body.data.groups.flatMap((g) => g.rules);
        // "unknown" until the first evaluation, one interval (1 s) after loading.
        return rules.length === expected.length && rules.every((r) => r.health !== 'unknown') && rules;
      },
      'every rule evaluated',
      15_000,
    );
    expect(loaded.map((r) => ({ name: r.name, health: r.health, lastError: r.lastError ?? '' })).sort((a, b) => a.name.localeCompare(b.name))).toEqual(
      expected.map((name) => ({ name, health: 'ok', lastError: '' })),
    );
  });

  it('promtool check metrics passes on the live /metrics of the api and of the worker', async () => {
    const promtool = process.env.PROMTOOL_BIN ?? 'promtool';
    expect(findBinary(promtool), 'apt-get install -y prometheus').toBeDefined();
    for (const [role, target] of Object.entries(targets)) {
      const res = await fetch(`http://${target}/metrics`);
      expect(res.status).toBe(200);
      const text = await res.text();
      // Every contract family is exposed by both roles, histograms with their observations.
      for (const name of Object.values(METRIC_NAMES)) expect(text, `${role} exposes ${name}`).toContain(`# TYPE ${name} `);
      const result = spawnSync(promtool, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 30_000 });
      expect({ role, status: result.status, output: `${result.stdout}${result.stderr}` }).toEqual({ role, status: 0, output: '' });
    }
  });
});

describe('dashboards and alert rules aggregate the global gauges with max()', () => {
  it('recognises the aggregation around a metric', () => {
    // The check below is only as good as this parser, so it is shown to tell them apart.
    expect(aggregationsOf('sum(webhook_dispatch_backlog)', 'webhook_dispatch_backlog')).toEqual(['sum']);
    expect(aggregationsOf('max by (job) (deriv(webhook_dispatch_backlog[5m])) > 0', 'webhook_dispatch_backlog')).toEqual(['max']);
    expect(aggregationsOf('sum by (x) (rate(a[1m])) / max(webhook_dispatch_backlog)', 'webhook_dispatch_backlog')).toEqual(['max']);
    expect(aggregationsOf('webhook_dispatch_backlog > 5 and max(webhook_dispatch_backlog_x)', 'webhook_dispatch_backlog')).toEqual(['none']);
    expect(aggregationsOf('avg(max(webhook_open_circuits))', 'webhook_open_circuits')).toEqual(['max']);
  });

  it('every dashboard query and alert expression over a global gauge uses max()', () => {
    const expressions = [
      ...dashboardExpressions().map((e) => ({ where: `${e.dashboard} / ${e.panel}`, expr: e.expr })),
      ...alertRules().map((r) => ({ where: `rule ${r.alert}`, expr: r.expr })),
    ];
    const uses: string[] = [];
    for (const { where, expr } of expressions) {
      for (const gauge of GLOBAL_GAUGES) {
        for (const agg of aggregationsOf(expr, gauge)) uses.push(`${where}: ${agg}(${gauge})`);
      }
    }
    // Every gauge is on a dashboard; the backlog, delay and dead-letter ones are also alerted on.
    for (const gauge of GLOBAL_GAUGES) expect(uses.some((u) => u.includes(`(${gauge})`)), gauge).toBe(true);
    expect(uses.filter((u) => !u.includes(': max('))).toEqual([]);
  });
});

function sortKeys(record: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}

/** Polls until `read()` equals `expected` (Prometheus lags the processes by a scrape or two). */
async function expectEventually<T>(read: () => Promise<T>, expected: T, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await read();
  while (JSON.stringify(sortDeep(last)) !== JSON.stringify(sortDeep(expected)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    last = await read();
  }
  expect(last).toEqual(expected);
}

function sortDeep(value: unknown): unknown {
  if (value && typeof value === 'object' && !Array.isArray(value)) return sortKeys(value as Record<string, number>);
  return value;
}
