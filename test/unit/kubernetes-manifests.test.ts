/**
 * deploy/kubernetes, checked without a cluster: every file is part of the kustomization (or of an
 * optional component), every object is valid against the Kubernetes and CRD schemas and has no
 * unknown fields, and the objects agree with each other, with the image and with the app's own
 * configuration schema. Whether the probe paths really answer is checked against the running app
 * in test/integration/kubernetes-probes.test.ts.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, posix, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { loadConfig } from '../../src/config/index.js';
import { envSchema } from '../../src/config/env-schema.js';
import { WORKER_NODE_FLAGS } from '../../src/config/node-flags.js';
import { METRIC_NAMES } from '../../src/metrics/registry.js';
import {
  byKind,
  containerEnv,
  findObject,
  k8sDir,
  KINDS,
  kindKey,
  kubectlAvailable,
  nameOf,
  OPTIONAL_COMPONENTS,
  podSpecs,
  readKustomization,
  readYaml,
  render,
  resolveContainerPort,
  root,
  schemaErrors,
  selects,
  unknownFieldErrors,
  type K8sObject,
  type Manifest,
} from '../helpers/kubernetes.js';

const base = render();
const withKeda = render(OPTIONAL_COMPONENTS);
/** Every distinct object of every variant (the patched worker Deployment appears in both forms). */
const allVariants: Manifest[] = [
  ...base,
  ...withKeda.filter((m) => !base.some((b) => JSON.stringify(b.object) === JSON.stringify(m.object))),
];

const read = (path: string) => readFileSync(join(root, path), 'utf8');
const secretPlaceholder = (name: string, key: string): string =>
  ({
    DATABASE_URL: 'postgres://relay:secret@postgres.example.internal:5432/webhooks',
    REDIS_URL: 'redis://redis.example.internal:6379',
    ADMIN_TOKEN: 'a'.repeat(32),
    SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
  })[key] ?? `${name}/${key}`;

function yamlFilesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) return yamlFilesUnder(path);
    return /\.ya?ml$/.test(entry) ? [posix.normalize(relative(k8sDir, path))] : [];
  });
}

/** Final stage of the Dockerfile: its USER (uid, gid) and WORKDIR. */
function imageRuntime(): { uid: number; gid: number | undefined; workdir: string | undefined } {
  const lines = read('Dockerfile').split('\n');
  const lastFrom = lines.findLastIndex((l) => /^FROM\s/i.test(l));
  const stage = lines.slice(lastFrom);
  const user = stage.findLast((l) => /^USER\s/i.test(l))?.replace(/^USER\s+/i, '').trim();
  const match = /^(\d+)(?::(\d+))?$/.exec(user ?? '');
  if (!match) throw new Error(`the image's USER must be numeric (uid or uid:gid), got "${user}"`);
  const workdir = stage.findLast((l) => /^WORKDIR\s/i.test(l))?.replace(/^WORKDIR\s+/i, '').trim();
  return { uid: Number(match[1]), gid: match[2] === undefined ? undefined : Number(match[2]), workdir };
}

const workloads = podSpecs(base);
const deployments = byKind(base, 'Deployment');
const containerOf = (deployment: K8sObject): K8sObject => deployment.spec.template.spec.containers[0];

describe('kustomization', () => {
  it('lists files that exist, and every YAML file is listed by it or by an optional component', () => {
    const rootK = readKustomization(k8sDir);
    expect(rootK.doc.apiVersion).toBe('kustomize.config.k8s.io/v1beta1');
    expect(rootK.doc.kind).toBe('Kustomization');
    const accounted = new Set<string>(['kustomization.yaml']);
    for (const file of rootK.resources) {
      expect(file, 'resources are files in this directory').not.toMatch(/\/|^\.\./);
      expect(readdirSync(k8sDir), file).toContain(file);
      accounted.add(file);
    }
    // Optional components stay out of the default resources; each is a valid kustomize Component
    // whose resources and patches exist.
    for (const component of OPTIONAL_COMPONENTS) {
      expect(rootK.components, `${component} is optional, not enabled by default`).not.toContain(component);
      const k = readKustomization(join(k8sDir, component));
      expect(k.doc.apiVersion).toBe('kustomize.config.k8s.io/v1alpha1');
      expect(k.doc.kind).toBe('Component');
      accounted.add(`${component}/kustomization.yaml`);
      for (const file of [...k.resources, ...k.patches.map((p) => p.path)]) {
        expect(readdirSync(join(k8sDir, component)), `${component}/${file}`).toContain(file);
        accounted.add(`${component}/${file}`);
      }
    }
    expect(yamlFilesUnder(k8sDir).sort()).toEqual([...accounted].sort());
  });

  it("deploys the image of this checkout's version", () => {
    const images = (readKustomization(k8sDir).doc.images ?? []) as Array<{ name: string; newTag?: string }>;
    const version = (JSON.parse(read('package.json')) as { version: string }).version;
    expect(images.find((i) => i.name === 'webhook-relay')?.newTag).toBe(version);
  });

  it('the optional component is documented, and the way to enable it is in the kustomization', () => {
    const readme = read('deploy/kubernetes/README.md');
    for (const component of OPTIONAL_COMPONENTS) {
      expect(readme).toContain(component);
      expect(read('deploy/kubernetes/kustomization.yaml')).toContain(`#   - ${component}`);
    }
    expect(readme).toContain('kubectl apply -k deploy/kubernetes');
  });

  it('objects are unique by kind and name, and every kind has a schema', () => {
    for (const variant of [base, withKeda]) {
      const keys = variant.map((m) => `${m.object.kind}/${m.object.metadata?.name}`);
      expect(new Set(keys).size).toBe(keys.length);
    }
    for (const m of allVariants) expect(Object.keys(KINDS), nameOf(m)).toContain(kindKey(m.object));
  });

  it('has the pieces a deployment needs', () => {
    const kinds = (ms: Manifest[]) => ms.map((m) => `${m.object.kind}/${m.object.metadata.name}`).sort();
    expect(kinds(base)).toEqual(
      [
        'ConfigMap/webhook-relay-config',
        'Deployment/webhook-relay-api',
        'Deployment/webhook-relay-worker',
        'HorizontalPodAutoscaler/webhook-relay-api',
        'Job/webhook-relay-migrate',
        'Namespace/webhook-relay',
        'PodDisruptionBudget/webhook-relay-api',
        'PodDisruptionBudget/webhook-relay-worker',
        'Service/webhook-relay-api',
        'Service/webhook-relay-worker',
        'ServiceAccount/webhook-relay',
        'ServiceMonitor/webhook-relay',
      ].sort(),
    );
    expect(kinds(withKeda)).toEqual([...kinds(base), 'ScaledObject/webhook-relay-worker'].sort());
  });
});

describe('schemas', () => {
  const cases = allVariants.map((m) => [base.includes(m) ? nameOf(m) : `${nameOf(m)} (with ${OPTIONAL_COMPONENTS.join(', ')})`, m] as const);
  it.each(cases)('%s is valid', (_name, m) => {
    expect(schemaErrors(m.object)).toEqual([]);
  });

  // The compiler's start-up takes a few seconds; more on a busy machine.
  it('no object has a field its type does not know', { timeout: 90_000 }, () => {
    expect(unknownFieldErrors(allVariants)).toEqual([]);
  });

  // The checks above must be able to fail: mutated copies of real manifests are rejected.
  it('rejects a wrong field type, a missing required field and a value outside an enum', () => {
    const api = structuredClone(findObject(base, 'Deployment', 'webhook-relay-api'));
    containerOf(api).ports[0].containerPort = '3000';
    expect(schemaErrors(api).join()).toMatch(/containerPort must be integer/);

    const nameless = structuredClone(findObject(base, 'Deployment', 'webhook-relay-worker'));
    delete containerOf(nameless).name;
    expect(schemaErrors(nameless).join()).toMatch(/must have required property '?name'?/);

    const scaled = structuredClone(findObject(withKeda, 'ScaledObject', 'webhook-relay-worker'));
    scaled.spec.triggers[0].metadata.threshold = 5000;
    expect(schemaErrors(scaled).join()).toMatch(/threshold must be string/);

    const monitor = structuredClone(findObject(base, 'ServiceMonitor', 'webhook-relay'));
    monitor.spec.endpoints[0].scheme = 'ftp';
    expect(schemaErrors(monitor).join()).toMatch(/scheme must be equal to one of the allowed values/);

    const hpa = structuredClone(findObject(base, 'HorizontalPodAutoscaler', 'webhook-relay-api'));
    hpa.spec.minReplicas = '2';
    expect(schemaErrors(hpa).join()).toMatch(/minReplicas must be integer/);

    expect(schemaErrors({ apiVersion: 'apps/v1', kind: 'Deploymnet', metadata: { name: 'x' } })).toEqual([
      'no schema for apps/v1/Deploymnet',
    ]);
  });

  it('rejects an unknown field', { timeout: 90_000 }, () => {
    const api = structuredClone(findObject(base, 'Deployment', 'webhook-relay-api'));
    const container = containerOf(api);
    container.readinesProbe = container.readinessProbe;
    delete container.readinessProbe;
    const scaled = structuredClone(findObject(withKeda, 'ScaledObject', 'webhook-relay-worker'));
    scaled.spec.minReplicas = 3;
    const errors = unknownFieldErrors([
      { file: 'api-deployment.yaml', object: api },
      { file: 'components/keda/worker-scaledobject.yaml', object: scaled },
    ]);
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^api-deployment\.yaml: Deployment\/webhook-relay-api: .*'"readinesProbe"' does not exist/);
    expect(errors[1]).toMatch(/^components\/keda\/worker-scaledobject\.yaml: ScaledObject\/webhook-relay-worker: .*'"minReplicas"' does not exist/);
  });

  it('reads manifests as Kubernetes does (YAML 1.1) and refuses duplicate keys', () => {
    const dir = mkdtempSync(join(tmpdir(), 'whr-k8s-'));
    try {
      writeFileSync(join(dir, 'a.yaml'), 'data:\n  ENABLED: on\n');
      expect(readYaml(join(dir, 'a.yaml'))).toEqual([{ data: { ENABLED: true } }]);
      writeFileSync(join(dir, 'b.yaml'), 'data:\n  A: "1"\n  A: "2"\n');
      expect(() => readYaml(join(dir, 'b.yaml'))).toThrow(/unique/i);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!kubectlAvailable)('kubectl kustomize renders the same objects, with and without KEDA, and they validate', () => {
    const dir = mkdtempSync(join(tmpdir(), 'whr-k8s-'));
    try {
      cpSync(k8sDir, dir, { recursive: true });
      const build = (): K8sObject[] =>
        execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })
          .split(/^---$/m)
          .map((doc) => parse(doc) as K8sObject)
          .filter(Boolean);
      const names = (objects: K8sObject[]) => objects.map((o) => `${o.kind}/${o.metadata.name}`).sort();

      const rendered = build();
      expect(names(rendered)).toEqual(names(base.map((m) => m.object)));
      for (const o of rendered) {
        expect(schemaErrors(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
        if (o.kind !== 'Namespace') expect(o.metadata.namespace, `${o.kind}/${o.metadata.name}`).toBe('webhook-relay');
      }

      // Enabling KEDA as the README says: uncomment the components in the kustomization.
      const kustomization = readFileSync(join(dir, 'kustomization.yaml'), 'utf8');
      const enabled = kustomization.replace(/^# components:\n((?:#\s+- .*\n)+)/m, (_all, list: string) => `components:\n${list.replace(/^#/gm, '')}`);
      expect(enabled).not.toBe(kustomization);
      writeFileSync(join(dir, 'kustomization.yaml'), enabled);
      const scaled = build();
      expect(names(scaled)).toEqual(names(withKeda.map((m) => m.object)));
      for (const o of scaled) expect(schemaErrors(o), `${o.kind}/${o.metadata.name}`).toEqual([]);
      expect(scaled.find((o) => o.kind === 'Deployment' && o.metadata.name === 'webhook-relay-worker')!.spec.replicas).toBeUndefined();
      expect(stringify(scaled)).toContain(METRIC_NAMES.dispatchBacklog);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('workloads', () => {
  it('run the compiled entry point with their role: node dist/main.js <role> (the worker with its V8 flags)', () => {
    const roles = /const roles = \[([^\]]*)\] as const/.exec(read('src/main.ts'))?.[1]?.match(/'[a-z]+'/g)?.map((r) => r.slice(1, -1));
    expect(roles).toEqual(expect.arrayContaining(['api', 'worker', 'migrate']));
    // npm run build compiles src/ into dist/, so src/main.ts becomes dist/main.js.
    const build = JSON.parse(read('tsconfig.build.json'));
    expect(build.compilerOptions).toMatchObject({ rootDir: 'src', outDir: 'dist' });
    const { workdir } = imageRuntime();
    expect(workdir).toBe('/app');
    expect(workloads.map((w) => w.labels['app.kubernetes.io/component']).sort()).toEqual(['api', 'migrate', 'worker']);
    for (const { manifest, pod, labels } of workloads) {
      expect(pod.containers, nameOf(manifest)).toHaveLength(1);
      const container = pod.containers[0];
      const role = labels['app.kubernetes.io/component'];
      expect(roles, nameOf(manifest)).toContain(role);
      expect(container.command, nameOf(manifest)).toEqual(['node', ...(role === 'worker' ? WORKER_NODE_FLAGS : []), 'dist/main.js', role]);
      expect(container.args, nameOf(manifest)).toBeUndefined();
      expect(container.workingDir ?? '/app', nameOf(manifest)).toBe('/app');
      expect(container.image, nameOf(manifest)).toBe('webhook-relay');
    }
    // The image name the workloads use is the one the kustomization points at a registry.
    expect(readKustomization(k8sDir).doc.images.map((i: K8sObject) => i.name)).toEqual(['webhook-relay']);
  });

  it('run as the image user, non-root, read-only, without privileges or capabilities, under RuntimeDefault seccomp', () => {
    const { uid, gid } = imageRuntime();
    for (const { manifest, pod } of workloads) {
      const where = nameOf(manifest);
      expect(pod.securityContext, where).toMatchObject({ runAsNonRoot: true, runAsUser: uid, seccompProfile: { type: 'RuntimeDefault' } });
      if (gid !== undefined) expect(pod.securityContext.runAsGroup, where).toBe(gid);
      expect(pod.automountServiceAccountToken, where).toBe(false);
      expect(pod.hostNetwork ?? false, where).toBe(false);
      for (const container of [...(pod.initContainers ?? []), ...pod.containers]) {
        const sc = container.securityContext;
        expect(sc, where).toMatchObject({
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
        expect(sc.privileged ?? false, where).toBe(false);
        expect(sc.capabilities.add, where).toBeUndefined();
        // A container-level user would override the pod's; it must not differ from the image's.
        if (sc.runAsUser !== undefined) expect(sc.runAsUser, where).toBe(uid);
        // /tmp is writable scratch space on the read-only root filesystem.
        const tmp = container.volumeMounts?.find((v: K8sObject) => v.mountPath === '/tmp');
        expect(tmp, where).toBeDefined();
        expect(pod.volumes.find((v: K8sObject) => v.name === tmp.name)?.emptyDir, where).toBeDefined();
      }
      for (const mount of pod.containers.flatMap((c: K8sObject) => c.volumeMounts ?? [])) {
        expect(pod.volumes.map((v: K8sObject) => v.name), where).toContain(mount.name);
      }
    }
    // The namespace enforces the same, as the "restricted" Pod Security Standard.
    expect(findObject(base, 'Namespace', 'webhook-relay').metadata.labels['pod-security.kubernetes.io/enforce']).toBe('restricted');
  });

  it('request and limit CPU and memory', () => {
    for (const { manifest, pod } of workloads) {
      for (const container of pod.containers) {
        expect(container.resources?.requests, nameOf(manifest)).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
        expect(container.resources?.limits, nameOf(manifest)).toMatchObject({ cpu: expect.any(String), memory: expect.any(String) });
      }
    }
  });

  it('set only variables the app reads, and a configuration the app accepts', () => {
    const known = Object.keys(envSchema.shape);
    for (const { manifest, pod } of workloads) {
      const container = pod.containers[0];
      const env = containerEnv(base, container, secretPlaceholder);
      for (const name of Object.keys(env)) expect(known, `${nameOf(manifest)} sets ${name}`).toContain(name);
      const config = loadConfig(env);
      expect(config.nodeEnv, nameOf(manifest)).toBe('production');
      expect(config.allowPrivateTargets, nameOf(manifest)).toBe(false);
    }
  });

  it('take credentials only from the operator-created Secret, key by key; no Secret is shipped', () => {
    expect(allVariants.filter((m) => m.object.kind === 'Secret')).toEqual([]);
    const credentials = ['DATABASE_URL', 'REDIS_URL', 'ADMIN_TOKEN', 'SECRETS_KEY'];
    for (const { manifest, pod } of workloads) {
      const container = pod.containers[0];
      for (const name of credentials) {
        const entry = container.env.find((e: K8sObject) => e.name === name);
        expect(entry?.valueFrom?.secretKeyRef, `${nameOf(manifest)} ${name}`).toEqual({ name: 'webhook-relay-secrets', key: name });
      }
      for (const from of container.envFrom ?? []) expect(from.secretRef, nameOf(manifest)).toBeUndefined();
    }
    for (const data of byKind(base, 'ConfigMap').map((m) => m.object.data)) {
      for (const name of credentials) expect(Object.keys(data)).not.toContain(name);
    }
    // The README says how to create that Secret, with every key the pods need.
    const readme = read('deploy/kubernetes/README.md');
    expect(readme).toMatch(/kubectl .*create secret generic webhook-relay-secrets/);
    for (const name of credentials) expect(readme).toContain(`--from-literal=${name}=`);
  });

  it('serve on the PORT they set: probes, Service and ServiceMonitor ports resolve to that containerPort', () => {
    for (const deployment of deployments) {
      const container = containerOf(deployment.object);
      const port = loadConfig(containerEnv(base, container, secretPlaceholder)).port;
      expect(container.ports.map((p: K8sObject) => p.containerPort), nameOf(deployment)).toEqual([port]);
      for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
        const get = container[probe]?.httpGet;
        expect(get, `${nameOf(deployment)} ${probe}`).toBeDefined();
        expect(resolveContainerPort(container, get.port), `${nameOf(deployment)} ${probe}`).toBe(port);
      }
      expect(container.livenessProbe.httpGet.path).toBe('/healthz');
      expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    }

    const services = byKind(base, 'Service');
    for (const service of services) {
      const targets = deployments.filter((d) => selects(service.object.spec.selector, d.object.spec.template.metadata.labels));
      expect(targets, nameOf(service)).toHaveLength(1);
      for (const port of service.object.spec.ports) {
        expect(resolveContainerPort(containerOf(targets[0]!.object), port.targetPort), `${nameOf(service)} ${port.name}`).toBeDefined();
      }
    }

    const monitor = findObject(base, 'ServiceMonitor', 'webhook-relay');
    const scraped = services.filter((s) => selects(monitor.spec.selector.matchLabels, s.object.metadata.labels));
    expect(scraped.map((s) => s.object.metadata.name).sort()).toEqual(['webhook-relay-api', 'webhook-relay-worker']);
    for (const endpoint of monitor.spec.endpoints) {
      expect(endpoint.path).toBe('/metrics');
      for (const service of scraped) expect(service.object.spec.ports.map((p: K8sObject) => p.name), nameOf(service)).toContain(endpoint.port);
    }
  });

  it('drain within the termination grace period: it outlasts the preStop sleep and the forced exit after SIGTERM', () => {
    // main.ts exits on its own at the latest attemptTimeoutMs + this margin after SIGTERM.
    const margin = /process\.exit\(1\), config\.attemptTimeoutMs \+ ([\d_]+)\)/.exec(read('src/main.ts'))?.[1];
    expect(margin, 'the forced-exit timer in src/main.ts').toBeDefined();
    for (const deployment of deployments) {
      const pod = deployment.object.spec.template.spec;
      const container = pod.containers[0];
      const config = loadConfig(containerEnv(base, container, secretPlaceholder));
      const preStop = container.lifecycle?.preStop?.exec?.command as string[] | undefined;
      const sleep = preStop ? Number(/^sleep$/.test(preStop[0]!) ? preStop[1] : NaN) : 0;
      expect(sleep, nameOf(deployment)).not.toBeNaN();
      const drainSeconds = (config.attemptTimeoutMs + Number(margin!.replace(/_/g, ''))) / 1000;
      expect(pod.terminationGracePeriodSeconds, nameOf(deployment)).toBeGreaterThan(sleep + drainSeconds);
    }
    // The API keeps serving while its endpoint is removed from the Service.
    expect(containerOf(findObject(base, 'Deployment', 'webhook-relay-api')).lifecycle.preStop.exec.command).toEqual(['sleep', '5']);
  });
});

describe('scaling and disruption', () => {
  it('the HPA scales the api Deployment on CPU, and owns its replica count', () => {
    const hpa = findObject(base, 'HorizontalPodAutoscaler', 'webhook-relay-api');
    const api = findObject(base, 'Deployment', 'webhook-relay-api');
    expect(hpa.spec.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'webhook-relay-api' });
    expect(hpa.spec.metrics).toEqual([{ type: 'Resource', resource: { name: 'cpu', target: { type: 'Utilization', averageUtilization: expect.any(Number) } } }]);
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    expect(hpa.spec.maxReplicas).toBeGreaterThan(hpa.spec.minReplicas);
    expect(api.spec.replicas).toBeUndefined();
    // Utilization is relative to the request, which must be set.
    expect(containerOf(api).resources.requests.cpu).toBeDefined();
  });

  it('each Deployment has a PodDisruptionBudget selecting exactly its pods', () => {
    const budgets = byKind(base, 'PodDisruptionBudget');
    for (const deployment of deployments) {
      const labels = deployment.object.spec.template.metadata.labels;
      const mine = budgets.filter((b) => selects(b.object.spec.selector.matchLabels, labels));
      expect(mine, nameOf(deployment)).toHaveLength(1);
      expect(mine[0]!.object.spec.maxUnavailable ?? mine[0]!.object.spec.minAvailable, nameOf(deployment)).toBeDefined();
    }
    for (const budget of budgets) {
      const selected = deployments.filter((d) => selects(budget.object.spec.selector.matchLabels, d.object.spec.template.metadata.labels));
      expect(selected, nameOf(budget)).toHaveLength(1);
    }
  });

  it('the optional KEDA ScaledObject scales workers on max(webhook_dispatch_backlog) and takes over their replica count', () => {
    const scaled = findObject(withKeda, 'ScaledObject', 'webhook-relay-worker');
    expect(scaled.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: 'webhook-relay-worker' });
    const [trigger, ...others] = scaled.spec.triggers;
    expect(others).toEqual([]);
    expect(trigger.type).toBe('prometheus');
    // A global gauge with no labels of its own, identical on every pod: max() across them.
    expect(METRIC_NAMES.dispatchBacklog).toBe('webhook_dispatch_backlog');
    expect(trigger.metadata.query).toMatch(new RegExp(`^max\\(${METRIC_NAMES.dispatchBacklog}(\\{[^}]*\\})?\\)$`));
    expect(Number(trigger.metadata.threshold)).toBeGreaterThan(0);
    expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
    expect(scaled.spec.maxReplicaCount).toBeGreaterThan(scaled.spec.minReplicaCount);
    expect(findObject(base, 'Deployment', 'webhook-relay-worker').spec.replicas).toBeGreaterThanOrEqual(1);
    expect(findObject(withKeda, 'Deployment', 'webhook-relay-worker').spec.replicas).toBeUndefined();
    // The query's namespace is the one the kustomization deploys to.
    const namespace = /namespace="([^"]+)"/.exec(trigger.metadata.query)?.[1];
    expect(namespace).toBe(readKustomization(k8sDir).doc.namespace);
  });
});
