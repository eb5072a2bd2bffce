/**
 * There is no Docker engine in CI, so the compose stack and the monitoring files are checked
 * statically: the services exist, ports agree with the app's configuration and the scrape config,
 * every mounted path exists, and dashboards and alerts only use metrics the registry defines.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, posix, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { WORKER_NODE_FLAGS } from '../../src/config/node-flags.js';
import { METRIC_NAMES } from '../../src/metrics/registry.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');
// Compose files use YAML merge keys (<<: *app) for the shared app settings.
const yamlFile = (path: string): any => parse(read(path), { merge: true });

const compose = yamlFile('docker-compose.yml');
const services: Record<string, any> = compose.services;
const promConfig = yamlFile('grafana/prometheus/prometheus.yml');
const alerts = yamlFile('grafana/prometheus/alerts.yml');
const slo = yamlFile('grafana/prometheus/slo.yml');

function commandText(service: any): string {
  const c = service.command;
  return Array.isArray(c) ? c.join(' ') : String(c ?? '');
}

function envOf(service: any): Record<string, string> {
  const e = service.environment ?? {};
  if (Array.isArray(e)) return Object.fromEntries(e.map((kv: string) => kv.split(/=(.*)/s).slice(0, 2)));
  return e;
}

/** Bind mounts as [host path, container path]; named volumes are skipped. */
function bindMounts(service: any): [string, string][] {
  return (service.volumes ?? [])
    .map((v: any): [string, string] => (typeof v === 'string' ? (v.split(':').slice(0, 2) as [string, string]) : [v.source, v.target]))
    .filter(([host]: [string, string]) => host.startsWith('.') || host.startsWith('/'));
}

/** Where a container path comes from on the host, through the service's bind mounts. */
function hostPathFor(service: any, containerPath: string): string | undefined {
  for (const [host, target] of bindMounts(service)) {
    if (containerPath === target) return join(root, host);
    if (containerPath.startsWith(`${target}/`)) return join(root, host, posix.relative(target, containerPath));
  }
  return undefined;
}

function scrapeJob(name: string): any {
  const job = promConfig.scrape_configs.find((j: any) => j.job_name === name);
  if (!job) throw new Error(`scrape job ${name} missing`);
  return job;
}

/** host:port pairs a job scrapes, from static targets or DNS discovery. */
function scrapeTargets(job: any): string[] {
  const statics = (job.static_configs ?? []).flatMap((s: any) => s.targets);
  const dns = (job.dns_sd_configs ?? []).flatMap((d: any) => d.names.map((n: string) => `${n}:${d.port}`));
  return [...statics, ...dns];
}

describe('docker-compose.yml', () => {
  it('has the whole stack', () => {
    for (const name of ['postgres', 'redis', 'api', 'worker', 'prometheus', 'grafana']) {
      expect(services, name).toHaveProperty(name);
    }
    expect(services.postgres.image).toMatch(/^postgres:16/);
    expect(services.redis.image).toMatch(/^redis:7/);
  });

  it('redis keeps its data and never evicts queued work', () => {
    const cmd = commandText(services.redis);
    expect(cmd).toMatch(/--appendonly yes/);
    expect(cmd).toMatch(/--maxmemory-policy noeviction/);
  });

  it('api and worker run the image with their roles and production settings', () => {
    expect(services.api.build).toBeDefined();
    // Compiled JavaScript, node as the container's process (CONTRACT: node dist/main.js <role>).
    expect(commandText(services.migrate)).toBe('node dist/main.js migrate');
    expect(commandText(services.api)).toBe('node dist/main.js api');
    expect(commandText(services.worker)).toBe(['node', ...WORKER_NODE_FLAGS, 'dist/main.js', 'worker'].join(' '));
    // `npm run start:worker` starts it with the same flags, through tsx.
    const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts as Record<string, string>;
    expect(scripts['start:worker']).toBe(['exec node', ...WORKER_NODE_FLAGS, '--import tsx src/main.ts worker'].join(' '));
    for (const name of ['api', 'worker']) {
      const env = envOf(services[name]);
      expect(env.NODE_ENV).toBe('production');
      expect(env.DATABASE_URL).toBe('postgres://postgres:postgres@postgres:5432/webhooks');
      expect(env.REDIS_URL).toBe('redis://redis:6379');
      // Required in production: compose refuses to start without them instead of inventing them.
      expect(env.ADMIN_TOKEN).toMatch(/^\$\{ADMIN_TOKEN:\?.+\}$/);
      expect(env.SECRETS_KEY).toMatch(/^\$\{SECRETS_KEY:\?.+\}$/);
    }
  });

  it("publishes the api's PORT and checks its readiness on that port", () => {
    const port = envOf(services.api).PORT;
    expect(port).toBe('3000');
    expect(services.api.ports.map(String)).toContain(`${port}:${port}`);
    expect(JSON.stringify(services.api.healthcheck.test)).toContain(`127.0.0.1:${port}/readyz`);
  });

  it('the worker can be scaled: no container name, no fixed host port', () => {
    expect(services.worker.container_name).toBeUndefined();
    expect(services.worker.ports).toBeUndefined();
    expect(envOf(services.worker).PORT).toBe('3001');
  });

  it('every depends_on names a condition', () => {
    for (const [name, service] of Object.entries(services)) {
      if (!service.depends_on) continue;
      expect(Array.isArray(service.depends_on), `${name}.depends_on must be a map with conditions`).toBe(false);
      for (const [dep, spec] of Object.entries<any>(service.depends_on)) {
        expect(services, `${name} depends on unknown ${dep}`).toHaveProperty(dep);
        expect(['service_healthy', 'service_completed_successfully', 'service_started']).toContain(spec.condition);
        if (spec.condition === 'service_healthy') expect(services[dep].healthcheck, `${dep} needs a healthcheck`).toBeDefined();
      }
    }
    expect(services.api.depends_on.postgres.condition).toBe('service_healthy');
    expect(services.api.depends_on.redis.condition).toBe('service_healthy');
    expect(services.worker.depends_on.postgres.condition).toBe('service_healthy');
  });

  it('data services and the api have healthchecks', () => {
    for (const name of ['postgres', 'redis', 'api', 'worker']) expect(services[name].healthcheck, name).toBeDefined();
  });

  it('every bind-mounted path exists in the repository', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [host] of bindMounts(service)) {
        expect(existsSync(join(root, host)), `${name} mounts ${host}`).toBe(true);
      }
    }
  });

  it('prometheus loads the repository config and its rule files', () => {
    const prom = services.prometheus;
    const configFlag = prom.command.find((c: string) => c.startsWith('--config.file='));
    const configInContainer = configFlag.slice('--config.file='.length);
    const hostConfig = hostPathFor(prom, configInContainer);
    expect(hostConfig).toBe(join(root, 'grafana/prometheus/prometheus.yml'));
    // rule_files are relative to the config file, inside the container as in the repository.
    for (const rules of promConfig.rule_files) {
      expect(hostPathFor(prom, posix.join(posix.dirname(configInContainer), rules))).toBe(join(root, 'grafana/prometheus', rules));
      expect(existsSync(join(root, 'grafana/prometheus', rules))).toBe(true);
    }
    expect(promConfig.rule_files).toEqual(['alerts.yml', 'slo.yml']);
  });

  it('the scrape config names the api and worker services at the ports they listen on', () => {
    expect(scrapeTargets(scrapeJob('webhook-api'))).toContain(`api:${envOf(services.api).PORT}`);
    expect(scrapeTargets(scrapeJob('webhook-worker'))).toContain(`worker:${envOf(services.worker).PORT}`);
    for (const job of ['webhook-api', 'webhook-worker']) expect(scrapeJob(job).metrics_path ?? '/metrics').toBe('/metrics');
    // The datasource reaches the prometheus service on the port it serves.
    expect(services.prometheus.ports.map(String)).toContain('9090:9090');
  });

  it('grafana is provisioned from the repository and viewable without login', () => {
    const grafana = services.grafana;
    const provisioning = hostPathFor(grafana, '/etc/grafana/provisioning');
    expect(provisioning).toBe(join(root, 'grafana/provisioning'));
    const datasources = yamlFile('grafana/provisioning/datasources/prometheus.yml').datasources;
    expect(datasources).toEqual([expect.objectContaining({ uid: 'prometheus', type: 'prometheus', url: 'http://prometheus:9090' })]);

    const providers = yamlFile('grafana/provisioning/dashboards/dashboards.yml').providers;
    for (const provider of providers) {
      const hostDir = hostPathFor(grafana, provider.options.path);
      expect(hostDir, `${provider.options.path} is mounted`).toBe(join(root, 'grafana/dashboards'));
      expect(readdirSync(hostDir!).filter((f) => f.endsWith('.json')).sort()).toEqual(['platform-chain.json', 'provider-chain.json']);
    }
    const env = envOf(grafana);
    expect(env.GF_AUTH_ANONYMOUS_ENABLED).toBe('true');
    expect(env.GF_AUTH_ANONYMOUS_ORG_ROLE).toBe('Viewer');
    const home = hostPathFor(grafana, env.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH!);
    expect(home && existsSync(home)).toBe(true);
  });
});

describe('traces in docker-compose.yml', () => {
  const tempoConfig = yamlFile('grafana/tempo/tempo.yml');
  const tempoSources = yamlFile('grafana/provisioning/datasources/tempo.yml').datasources;

  it('the app exports to the OTLP port Tempo receives on', () => {
    const otlp = tempoConfig.distributor.receivers.otlp.protocols.http.endpoint as string;
    for (const name of ['api', 'worker']) {
      const endpoint = envOf(services[name]).OTEL_EXPORTER_OTLP_ENDPOINT!;
      expect(endpoint).toBe(`\${OTEL_EXPORTER_OTLP_ENDPOINT-http://tempo:${otlp.split(':').at(-1)}}`);
    }
    expect(hostPathFor(services.tempo, '/etc/tempo/tempo.yml')).toBe(join(root, 'grafana/tempo/tempo.yml'));
  });

  it("Grafana reads Tempo where it serves, and Prometheus' exemplars link to it", () => {
    expect(tempoSources).toEqual([expect.objectContaining({ uid: 'tempo', type: 'tempo', url: `http://tempo:${tempoConfig.server.http_listen_port}` })]);
    const prometheus = yamlFile('grafana/provisioning/datasources/prometheus.yml').datasources[0];
    expect(prometheus.jsonData.exemplarTraceIdDestinations).toEqual([{ name: 'trace_id', datasourceUid: 'tempo' }]);
    expect(services.prometheus.command).toContain('--enable-feature=exemplar-storage');
  });
});

describe('Dockerfile', () => {
  const dockerfile = read('Dockerfile');

  it('builds on node 20, installs from the lockfile and runs as node, by number', () => {
    expect(dockerfile).toMatch(/^FROM node:20-bookworm-slim$/m);
    expect(dockerfile).toMatch(/^RUN npm ci\b/m);
    // uid:gid 1000 is `node` in the official image; numeric so Kubernetes can verify runAsNonRoot.
    expect(dockerfile).toMatch(/^USER 1000:1000$/m);
  });

  it('keeps node_modules and .env out of the build context', () => {
    const ignored = read('.dockerignore').split('\n').map((l) => l.trim());
    expect(ignored).toContain('node_modules');
    expect(ignored).toContain('.env');
  });
});

// ---------------------------------------------------------------------------------------------
// Dashboards and alert rules only use metrics the registry defines, with the right aggregation.
// (Whether their PromQL parses and returns data is checked against a real Prometheus in
// test/integration/prometheus-helper.test.ts; alert behaviour by promtool.)
// ---------------------------------------------------------------------------------------------

const knownMetrics = new Set<string>(Object.values(METRIC_NAMES));
/** Series recorded by slo.yml (`level:metric:operations` names); dashboards may query them too. */
const recorded = new Set<string>(slo.groups.flatMap((g: any) => g.rules).filter((r: any) => r.record).map((r: any) => r.record as string));
const globalGauges = [
  METRIC_NAMES.dispatchBacklog,
  METRIC_NAMES.deadLetterDeliveries,
  METRIC_NAMES.oldestPendingAge,
  METRIC_NAMES.openCircuits,
];

/** webhook_* metric names used in an expression, with histogram suffixes removed. */
function metricsUsed(expr: string): string[] {
  return [...expr.matchAll(/\bwebhook_[a-z_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''));
}

/** Recorded series (`slo:…:…`) used in an expression. */
function recordedUsed(expr: string): string[] {
  return [...expr.matchAll(/\bslo:[a-z_]+:[a-z0-9_]+/g)].map((m) => m[0]);
}

function dashboardPanels(file: string): any[] {
  const flatten = (panels: any[]): any[] => panels.flatMap((p) => [p, ...flatten(p.panels ?? [])]);
  return flatten(JSON.parse(read(`grafana/dashboards/${file}`)).panels);
}

describe('dashboards', () => {
  it.each([
    ['provider-chain.json', 'Provider chain'],
    ['platform-chain.json', 'Platform chain'],
  ])('%s is "%s" and every panel queries known metrics through uid prometheus', (file, title) => {
    expect(JSON.parse(read(`grafana/dashboards/${file}`)).title).toBe(title);
    const panels = dashboardPanels(file).filter((p) => p.type !== 'row');
    expect(panels.length).toBeGreaterThan(4);
    for (const panel of panels) {
      expect(panel.datasource?.uid, panel.title).toBe('prometheus');
      expect(panel.targets.length, panel.title).toBeGreaterThan(0);
      for (const target of panel.targets) {
        expect(target.datasource?.uid ?? panel.datasource.uid).toBe('prometheus');
        const used = metricsUsed(target.expr);
        const fromRules = recordedUsed(target.expr);
        expect(used.length + fromRules.length, `${panel.title}: ${target.expr}`).toBeGreaterThan(0);
        for (const name of used) expect(knownMetrics, `${panel.title}: ${name}`).toContain(name);
        for (const name of fromRules) expect(recorded, `${panel.title}: ${name}`).toContain(name);
      }
    }
  });

  it('global gauges are aggregated with max(), never sum()', () => {
    const exprs = ['provider-chain.json', 'platform-chain.json'].flatMap((f) =>
      dashboardPanels(f).flatMap((p) => (p.targets ?? []).map((t: any) => t.expr as string)),
    );
    for (const gauge of globalGauges) {
      const uses = exprs.filter((e) => e.includes(gauge));
      expect(uses.length, gauge).toBeGreaterThan(0);
      for (const e of uses) expect(e, e).toMatch(/^max\(/);
    }
  });
});

describe('alert rules and runbook', () => {
  const sloRules: any[] = slo.groups.flatMap((g: any) => g.rules);
  const rules: any[] = [...alerts.groups.flatMap((g: any) => g.rules), ...sloRules.filter((r) => r.alert)];
  const runbook = read('docs/runbook.md');
  /** GitHub's heading anchors: lowercase, spaces to dashes, punctuation dropped. */
  const anchors = new Set(
    [...runbook.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => m[1]!.trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')),
  );

  it('covers every alert the issue asks for', () => {
    expect(rules.map((r) => r.alert).sort()).toEqual([
      'WebhookDeadLettersGrowing',
      'WebhookDeliveryLatencyBudgetFastBurn',
      'WebhookDeliveryLatencyBudgetSlowBurn',
      'WebhookDispatchBacklogGrowing',
      'WebhookDispatchDelayed',
      'WebhookEgressProxyFailing',
      'WebhookEndpoint5xxShareHigh',
      'WebhookEndpointTerminal4xxHigh',
      'WebhookInboundSignatureRejections',
      'WebhookIntakeAvailabilityBudgetFastBurn',
      'WebhookIntakeAvailabilityBudgetSlowBurn',
      'WebhookReadReplicaLagging',
      'WebhookReadsFallingBack',
    ]);
  });

  it('SLO recording rules are named level:metric:operations and read only registry metrics', () => {
    for (const rule of sloRules.filter((r) => r.record)) {
      expect(rule.record).toMatch(/^slo:(delivery_latency|intake_availability):(error_budget|error_ratio_rate(5m|30m|1h|6h|30d))$/);
      for (const name of metricsUsed(rule.expr)) expect(knownMetrics).toContain(name);
    }
    // Every alert of slo.yml compares a long and a short window against the recorded budget.
    for (const rule of sloRules.filter((r) => r.alert)) {
      const used = recordedUsed(rule.expr);
      expect(used.filter((n) => n.endsWith(':error_budget')).length, rule.alert).toBe(2);
      for (const name of used) expect(recorded).toContain(name);
    }
  });

  it.each(rules.map((r) => [r.alert, r]))('%s has severity, summary and a runbook section', (_name, rule) => {
    expect(['critical', 'warning']).toContain(rule.labels.severity);
    expect(rule.annotations.summary).toBeTruthy();
    const match = /^docs\/runbook\.md#(.+)$/.exec(rule.annotations.runbook_url);
    expect(match, rule.annotations.runbook_url).not.toBeNull();
    expect(anchors).toContain(match![1]);
    for (const name of metricsUsed(rule.expr)) expect(knownMetrics).toContain(name);
    for (const gauge of globalGauges) {
      if (rule.expr.includes(gauge)) expect(rule.expr).not.toMatch(new RegExp(`sum[^(]*\\([^)]*${gauge}`));
    }
  });

  it('every rule has a promtool test', () => {
    const tests = read('grafana/prometheus/alerts.test.yml') + read('grafana/prometheus/slo.test.yml');
    for (const rule of rules) expect(tests).toContain(`alertname: ${rule.alert}`);
    expect(statSync(join(root, 'grafana/prometheus/alerts.test.yml')).isFile()).toBe(true);
  });
});
