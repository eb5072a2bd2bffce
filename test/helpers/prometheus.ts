/**
 * Starts a real Prometheus (Debian's `prometheus` package) against test instances, so dashboards'
 * and alerts' PromQL is proven against what the app actually exposes, not just parsed.
 *
 *   const prom = await startPrometheus({ targets: [`127.0.0.1:${port}`] });
 *   await prom.waitFor('up', (r) => r.length > 0 && r.every((s) => s.value === 1));
 *   const samples = await prom.query('sum(rate(webhook_inbound_receipts_total[1m]))');
 *   await prom.stop();
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export const DASHBOARD_FILES = ['grafana/dashboards/provider-chain.json', 'grafana/dashboards/platform-chain.json'];
const INSTALL_HINT = 'install it with `apt-get install -y prometheus` (Debian/Ubuntu package, also provides promtool)';

export interface Sample {
  metric: Record<string, string>;
  /** NaN and ±Inf come back as such (e.g. a quantile over a histogram with no observations). */
  value: number;
}

export interface StartPrometheusOptions {
  /** `host:port` pairs scraped at /metrics, e.g. `127.0.0.1:41234`. */
  targets: string[];
  /** Scrape and rule evaluation interval in seconds (default 1). */
  intervalSeconds?: number;
  /** Job label of the targets (default `webhook`). */
  job?: string;
  /** Rule files to load (absolute or repository-relative paths), e.g. the alert rules. */
  ruleFiles?: string[];
  /** The binary (default `$PROMETHEUS_BIN` or `prometheus` on PATH). */
  binary?: string;
  /** How long to wait for /-/ready (default 30 s). */
  readyTimeoutMs?: number;
}

export interface PrometheusInstance {
  /** Base URL, e.g. http://127.0.0.1:41235 */
  url: string;
  port: number;
  /** Instant query through the HTTP API; throws with Prometheus' message if the PromQL is invalid. */
  query(expr: string): Promise<Sample[]>;
  /** Polls `query(expr)` until `accept` returns true; throws with the last result on timeout. */
  waitFor(expr: string, accept?: (samples: Sample[]) => boolean, timeoutMs?: number): Promise<Sample[]>;
  /** Stops Prometheus and deletes its storage. */
  stop(): Promise<void>;
  /** Prometheus' own output so far, for failure messages. */
  logs(): string;
}

/** Whether a binary can be found: an absolute path that exists, or a name on PATH. */
export function findBinary(name: string): string | undefined {
  if (name.includes('/')) return existsSync(name) ? name : undefined;
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function configYaml(opts: Required<Pick<StartPrometheusOptions, 'targets' | 'intervalSeconds' | 'job'>>, ruleFiles: string[]): string {
  // JSON is valid YAML, so the config needs no YAML library and no quoting rules.
  return JSON.stringify(
    {
      global: {
        scrape_interval: `${opts.intervalSeconds}s`,
        scrape_timeout: `${opts.intervalSeconds}s`,
        evaluation_interval: `${opts.intervalSeconds}s`,
      },
      rule_files: ruleFiles,
      scrape_configs: [{ job_name: opts.job, metrics_path: '/metrics', static_configs: [{ targets: opts.targets }] }],
    },
    null,
    2,
  );
}

function parseValue(raw: string): number {
  // Prometheus encodes sample values as strings: "1", "NaN", "+Inf", "-Inf".
  if (raw === '+Inf') return Number.POSITIVE_INFINITY;
  if (raw === '-Inf') return Number.NEGATIVE_INFINITY;
  return Number(raw);
}

async function launch(binary: string, opts: StartPrometheusOptions, dir: string): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const port = await freePort();
  const configFile = join(dir, 'prometheus.yml');
  const ruleFiles = (opts.ruleFiles ?? []).map((f) => resolve(root, f));
  writeFileSync(
    configFile,
    configYaml({ targets: opts.targets, intervalSeconds: opts.intervalSeconds ?? 1, job: opts.job ?? 'webhook' }, ruleFiles),
  );
  const child = spawn(
    binary,
    [
      `--config.file=${configFile}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--storage.tsdb.retention.time=1h',
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (b: Buffer) => (output += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (output += b.toString()));
  return { child, port, output: () => output };
}

/** Starts Prometheus on a free loopback port and waits until it is ready. */
export async function startPrometheus(opts: StartPrometheusOptions): Promise<PrometheusInstance> {
  const name = opts.binary ?? process.env.PROMETHEUS_BIN ?? 'prometheus';
  const binary = findBinary(name);
  if (!binary) throw new Error(`prometheus binary "${name}" not found: ${INSTALL_HINT}`);
  const dir = mkdtempSync(join(tmpdir(), 'prometheus-test-'));
  const readyTimeoutMs = opts.readyTimeoutMs ?? 30_000;

  // The free port is found before Prometheus binds it, so another process may take it in between:
  // retry a few times with a fresh port when Prometheus exits early.
  let lastError = '';
  for (let tries = 0; tries < 3; tries++) {
    const { child, port, output } = await launch(binary, opts, dir);
    let exited = false;
    child.once('exit', () => (exited = true));
    const url = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + readyTimeoutMs;
    let ready = false;
    while (!exited && Date.now() < deadline) {
      try {
        if ((await fetch(`${url}/-/ready`)).ok) {
          ready = true;
          break;
        }
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    if (ready) return instance(child, url, port, dir, output);
    lastError = output();
    if (!exited) {
      child.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`prometheus did not become ready within ${readyTimeoutMs} ms:\n${lastError}`);
    }
  }
  rmSync(dir, { recursive: true, force: true });
  throw new Error(`prometheus exited before becoming ready:\n${lastError}`);
}

function instance(child: ChildProcess, url: string, port: number, dir: string, output: () => string): PrometheusInstance {
  // If the test process dies without calling stop(), do not leave Prometheus running.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  async function query(expr: string): Promise<Sample[]> {
    const res = await fetch(`${url}/api/v1/query`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ query: expr }),
    });
    const body = (await res.json()) as {
      status: string;
      error?: string;
      data?: { resultType: string; result: unknown };
    };
    if (body.status !== 'success' || !body.data) throw new Error(`query failed: ${expr}\n${body.error ?? res.status}`);
    const { resultType, result } = body.data;
    if (resultType === 'vector') {
      return (result as { metric: Record<string, string>; value: [number, string] }[]).map((s) => ({
        metric: s.metric,
        value: parseValue(s.value[1]),
      }));
    }
    if (resultType === 'scalar') return [{ metric: {}, value: parseValue((result as [number, string])[1]) }];
    throw new Error(`unexpected result type ${resultType} for ${expr}`);
  }

  async function waitFor(expr: string, accept = (s: Sample[]) => s.length > 0, timeoutMs = 30_000): Promise<Sample[]> {
    const deadline = Date.now() + timeoutMs;
    let last: Sample[] = [];
    while (Date.now() < deadline) {
      last = await query(expr);
      if (accept(last)) return last;
      await sleep(250);
    }
    throw new Error(`timed out waiting for ${expr}; last result ${JSON.stringify(last)}\n${output()}`);
  }

  async function stop(): Promise<void> {
    process.removeListener('exit', killOnExit);
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  }

  return { url, port, query, waitFor, stop, logs: output };
}

export interface DashboardExpression {
  /** Dashboard file, e.g. grafana/dashboards/platform-chain.json */
  file: string;
  dashboard: string;
  panel: string;
  refId: string;
  /** The query with Grafana's interval variables replaced, ready for the HTTP API. */
  expr: string;
}

/** Replaces Grafana's built-in interval variables ($__rate_interval, ${__interval}, ...) with a range. */
export function substituteGrafanaVariables(expr: string, range = '1m'): string {
  return expr.replace(/\$\{__(rate_interval|interval|range)\}|\$__(rate_interval|interval|range)\b/g, range);
}

/** Every panel query of both dashboards (rows' nested panels included). */
export function dashboardExpressions(range = '1m'): DashboardExpression[] {
  const out: DashboardExpression[] = [];
  for (const file of DASHBOARD_FILES) {
    const dashboard = JSON.parse(readFileSync(join(root, file), 'utf8')) as { title: string; panels: Panel[] };
    const visit = (panels: Panel[]) => {
      for (const panel of panels) {
        for (const target of panel.targets ?? []) {
          if (!target.expr) continue;
          out.push({ file, dashboard: dashboard.title, panel: panel.title, refId: target.refId, expr: substituteGrafanaVariables(target.expr, range) });
        }
        visit(panel.panels ?? []);
      }
    };
    visit(dashboard.panels);
  }
  return out;
}

interface Panel {
  title: string;
  targets?: { refId: string; expr?: string }[];
  panels?: Panel[];
}
