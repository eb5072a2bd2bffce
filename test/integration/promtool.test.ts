/**
 * The three promtool checks the issue asks CI to run: the alert rules are valid, their unit tests
 * pass, and the Prometheus config (with its rule files) is valid. Plus `promtool check metrics` on
 * what /metrics serves. promtool comes from Debian's `prometheus` package; a missing promtool
 * fails these tests (it never skips them), so CI cannot pass without running the checks.
 */
import { spawnSync } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { metrics, registry, statusClass } from '../../src/metrics/registry.js';
import { findBinary } from '../helpers/prometheus.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const promtool = process.env.PROMTOOL_BIN ?? 'promtool';

function run(args: string[], input?: string): { status: number | null; output: string } {
  if (!findBinary(promtool)) {
    throw new Error(
      `promtool not found${process.env.CI ? ' (CI)' : ''}: install it with \`apt-get install -y prometheus\` ` +
        '(or set PROMTOOL_BIN). These checks must not be skipped.',
    );
  }
  const result = spawnSync(promtool, args, { cwd: root, encoding: 'utf8', input, timeout: 60_000 });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

describe('promtool', () => {
  it.each(['alerts.yml', 'slo.yml'])('check rules grafana/prometheus/%s', (file) => {
    const { status, output } = run(['check', 'rules', `grafana/prometheus/${file}`]);
    expect(status, output).toBe(0);
  });

  it.each(['alerts.test.yml', 'slo.test.yml'])('test rules grafana/prometheus/%s', (file) => {
    const { status, output } = run(['test', 'rules', `grafana/prometheus/${file}`]);
    expect(status, output).toBe(0);
  });

  it('check config grafana/prometheus/prometheus.yml (resolving its rule files)', () => {
    const { status, output } = run(['check', 'config', 'grafana/prometheus/prometheus.yml']);
    expect(status, output).toBe(0);
    expect(output).toMatch(/SUCCESS: 2 rule files found/);
  });

  it('check metrics: the /metrics exposition passes the linter', async () => {
    // Record one of each kind so histograms and every metric family are present.
    metrics.inboundReceipts.inc({ source_type: 'standard-webhooks', outcome: 'accepted' });
    metrics.inboundAck.observe({ source_type: 'standard-webhooks', outcome: 'accepted' }, 0.003);
    metrics.deliveryAttempts.inc({ outcome: 'success', status_class: statusClass(200) });
    metrics.attemptDuration.observe({ status_class: '2xx' }, 0.04);
    metrics.deliveryLatency.observe(1.5);
    metrics.firstAttemptDelay.observe(0.2);
    const { status, output } = run(['check', 'metrics'], await registry.metrics());
    expect(status, output).toBe(0);
  });
});
