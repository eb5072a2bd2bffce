/**
 * Proves test/helpers/prometheus.ts against the real binary, and, ahead of the end-to-end test
 * with the running app, that every dashboard query is valid PromQL that returns data when
 * Prometheus scrapes this registry while traffic is recorded.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
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
  setBacklogSource,
} from '../../src/metrics/registry.js';
import { dashboardExpressions, findBinary, startPrometheus, substituteGrafanaVariables, type PrometheusInstance } from '../helpers/prometheus.js';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function serve(handler: () => Promise<string> | string): Promise<string> {
  const server: Server = createServer((req, res) => {
    if (req.url !== '/metrics') return void res.writeHead(404).end();
    Promise.resolve(handler()).then(
      (text) => res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(text),
      (err: unknown) => res.writeHead(500).end(String(err)),
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => new Promise((r) => server.close(() => r())));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function prometheus(...args: Parameters<typeof startPrometheus>): Promise<PrometheusInstance> {
  const prom = await startPrometheus(...args);
  cleanups.push(() => prom.stop());
  return prom;
}

describe('prometheus test helper', () => {
  it('finds the prometheus binary', () => {
    // Fails, rather than skips, so a CI image without the package cannot pass silently.
    const name = process.env.PROMETHEUS_BIN ?? 'prometheus';
    expect(findBinary(name), `${name} not found: apt-get install -y prometheus`).toBeDefined();
  });

  it('scrapes a target and answers queries', async () => {
    const target = await serve(() => '# TYPE demo_value gauge\ndemo_value{kind="static"} 42\n');
    const prom = await prometheus({ targets: [target] });
    const up = await prom.waitFor('up', (s) => s.length === 1 && s[0]!.value === 1);
    expect(up[0]!.metric).toMatchObject({ job: 'webhook', instance: target });
    expect(await prom.query('demo_value')).toEqual([
      { metric: { __name__: 'demo_value', instance: target, job: 'webhook', kind: 'static' }, value: 42 },
    ]);
    await expect(prom.query('sum(rate(demo_value[1m])')).rejects.toThrow(/query failed/);
  });

  it('replaces Grafana interval variables', () => {
    expect(substituteGrafanaVariables('rate(x[$__rate_interval]) + rate(y[${__interval}])')).toBe('rate(x[1m]) + rate(y[1m])');
    const exprs = dashboardExpressions();
    expect(new Set(exprs.map((e) => e.dashboard))).toEqual(new Set(['Provider chain', 'Platform chain']));
    for (const { expr } of exprs) expect(expr).not.toContain('$');
  });
});

describe('dashboard queries against a real Prometheus scraping this registry', () => {
  /** A little of every kind of traffic, recorded before each scrape so rates are never zero. */
  function recordTraffic(): void {
    for (const source_type of SOURCE_TYPES) {
      for (const outcome of RECEIPT_OUTCOMES) {
        metrics.inboundReceipts.inc({ source_type, outcome }, outcome === 'accepted' ? 3 : 1);
        metrics.inboundAck.observe({ source_type, outcome }, 0.002 + Math.random() * 0.01);
      }
    }
    for (const outcome of RECONCILE_OUTCOMES) metrics.reconcilePolls.inc({ outcome });
    for (const outcome of ATTEMPT_OUTCOMES) {
      for (const status_class of STATUS_CLASSES) metrics.deliveryAttempts.inc({ outcome, status_class });
    }
    for (const status_class of STATUS_CLASSES) metrics.attemptDuration.observe({ status_class }, 0.05 + Math.random());
    metrics.deliveryLatency.observe(0.2 + Math.random() * 30);
    for (let i = 0; i < 3; i++) metrics.firstAttemptDelay.observe(0.01 + Math.random() * 2);
    for (const reason of DEAD_LETTER_REASONS) metrics.deadLettered.inc({ reason });
    for (const kind of REPLAY_KINDS) metrics.replays.inc({ kind });
  }

  it('every panel expression is valid and returns data; the alert and SLO rules load', async () => {
    let backlog = 100;
    setBacklogSource(async () => ({ backlog: (backlog += 7), deadLetters: 4, oldestPendingAgeSeconds: 12, openCircuits: 1, pausedEndpoints: 0 }), { ttlMs: 0 });
    cleanups.push(async () => setBacklogSource(undefined));
    const target = await serve(async () => {
      recordTraffic();
      return registry.metrics();
    });
    const prom = await prometheus({ targets: [target], ruleFiles: ['grafana/prometheus/alerts.yml', 'grafana/prometheus/slo.yml'] });

    // Enough scrapes for rate() and deriv() over 1m windows to see changes.
    await prom.waitFor('count_over_time(webhook_dispatch_backlog[1m])', (s) => (s[0]?.value ?? 0) >= 4);

    const failures: string[] = [];
    for (const e of dashboardExpressions()) {
      const samples = await prom.query(e.expr).catch((err: Error) => err);
      if (samples instanceof Error) failures.push(`${e.dashboard} / ${e.panel} (${e.refId}): ${samples.message}`);
      else if (!samples.some((s) => Number.isFinite(s.value))) {
        failures.push(`${e.dashboard} / ${e.panel} (${e.refId}): no finite value: ${e.expr} → ${JSON.stringify(samples)}`);
      }
    }
    expect(failures).toEqual([]);

    const rules = (await (await fetch(`${prom.url}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string }[] }[] };
    };
    const loaded = rules.data.groups.flatMap((g) => g.rules);
    // Every rule of alerts.yml and slo.yml, as the files define them.
    const defined = ['alerts.yml', 'slo.yml'].flatMap((file) =>
      (parse(readFileSync(new URL(`../../grafana/prometheus/${file}`, import.meta.url), 'utf8')) as { groups: { rules: unknown[] }[] }).groups.flatMap((g) => g.rules),
    );
    expect(defined.length).toBeGreaterThanOrEqual(9 + 2 * (1 + 5 + 2));
    expect(loaded).toHaveLength(defined.length);
    // health becomes "ok" after the first evaluation; "err" would mean the query fails at runtime.
    for (const r of loaded) expect(r.health, r.name).not.toBe('err');
  }, 60_000);
});
