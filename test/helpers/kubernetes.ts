/**
 * Reads deploy/kubernetes the way `kubectl apply -k` would, without a cluster: the kustomization's
 * resources, the optional components (their resources and JSON 6902 patches), and checks of every
 * object against the Kubernetes object schemas.
 *
 * Two checks, because the schemas catch different mistakes:
 * - kubernetes-models (and its KEDA and Prometheus Operator packages) validate each object against
 *   the OpenAPI schemas of the API server and the CRDs: types, required fields, enums, formats.
 * - Those schemas allow unknown fields (as the API server's OpenAPI does), but the API server's
 *   strict field validation, kubectl's default, rejects them, so a misspelt `readinesProbe` would
 *   pass the first check and fail at apply time. The same packages' TypeScript declarations catch
 *   that: each object is compiled as an object literal of its declared type, and the compiler's
 *   excess-property check names any field the type does not have.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Namespace, ConfigMap, Service, ServiceAccount } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';

export const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const k8sDir = join(root, 'deploy/kubernetes');

/** Components that are deliberately left out of the default kustomization (enabled by operators). */
export const OPTIONAL_COMPONENTS = ['components/keda'];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type K8sObject = Record<string, any>;

export interface Manifest {
  /** Path relative to deploy/kubernetes. */
  file: string;
  object: K8sObject;
}

interface KindInfo {
  model: new (data: never) => { validate(): void };
  /** Module and interface of the object's TypeScript declaration (for the unknown-field check). */
  module: string;
  type: string;
}

/** Every kind the manifests may use. A new kind must be added here, with its schema. */
export const KINDS: Record<string, KindInfo> = {
  'v1/Namespace': { model: Namespace, module: 'kubernetes-models/v1', type: 'INamespace' },
  'v1/ServiceAccount': { model: ServiceAccount, module: 'kubernetes-models/v1', type: 'IServiceAccount' },
  'v1/ConfigMap': { model: ConfigMap, module: 'kubernetes-models/v1', type: 'IConfigMap' },
  'v1/Service': { model: Service, module: 'kubernetes-models/v1', type: 'IService' },
  'apps/v1/Deployment': { model: Deployment, module: 'kubernetes-models/apps/v1', type: 'IDeployment' },
  'batch/v1/Job': { model: Job, module: 'kubernetes-models/batch/v1', type: 'IJob' },
  'autoscaling/v2/HorizontalPodAutoscaler': {
    model: HorizontalPodAutoscaler,
    module: 'kubernetes-models/autoscaling/v2',
    type: 'IHorizontalPodAutoscaler',
  },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget, module: 'kubernetes-models/policy/v1', type: 'IPodDisruptionBudget' },
  'monitoring.coreos.com/v1/ServiceMonitor': {
    model: ServiceMonitor,
    module: '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1',
    type: 'IServiceMonitor',
  },
  'keda.sh/v1alpha1/ScaledObject': { model: ScaledObject, module: '@kubernetes-models/keda/keda.sh/v1alpha1', type: 'IScaledObject' },
};

export const kindKey = (o: K8sObject): string => `${o.apiVersion}/${o.kind}`;
export const nameOf = (m: Manifest): string => `${m.file}: ${m.object.kind}/${m.object.metadata?.name}`;

/**
 * Every document of a YAML file. Kubernetes reads manifests as YAML 1.1 (`on`, `yes` are booleans
 * there), so they are parsed as 1.1 here too; any parse error or warning fails.
 */
export function readYaml(path: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(path, 'utf8'), { version: '1.1', strict: true, uniqueKeys: true });
  const list = Array.isArray(docs) ? docs : [docs];
  const values: unknown[] = [];
  for (const doc of list) {
    const problems = [...doc.errors, ...doc.warnings];
    if (problems.length > 0) throw new Error(`${path}: ${problems.map((p) => p.message).join('; ')}`);
    const value = doc.toJS();
    if (value !== null && value !== undefined) values.push(value);
  }
  return values;
}

export interface Kustomization {
  dir: string;
  doc: K8sObject;
  resources: string[];
  components: string[];
  patches: Array<{ path: string; target: K8sObject }>;
}

export function readKustomization(dir: string): Kustomization {
  const [doc, ...rest] = readYaml(join(dir, 'kustomization.yaml')) as K8sObject[];
  if (!doc || rest.length > 0) throw new Error(`${dir}/kustomization.yaml: expected one document`);
  return {
    dir,
    doc,
    resources: doc.resources ?? [],
    components: doc.components ?? [],
    patches: doc.patches ?? [],
  };
}

/** JSON Pointer (RFC 6901) to [parent, key]. */
function locate(target: K8sObject, pointer: string): [K8sObject, string] {
  const parts = pointer
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));
  let parent: K8sObject = target;
  for (const part of parts.slice(0, -1)) {
    if (parent[part] === undefined) throw new Error(`patch path ${pointer}: no ${part}`);
    parent = parent[part];
  }
  return [parent, parts.at(-1)!];
}

/** The JSON 6902 operations the components use (remove, add, replace). */
export function applyJson6902(target: K8sObject, ops: K8sObject[]): K8sObject {
  const copy = structuredClone(target);
  for (const op of ops) {
    const [parent, key] = locate(copy, op.path);
    if (op.op === 'remove') {
      if (!(key in parent)) throw new Error(`patch remove ${op.path}: nothing there`);
      delete parent[key];
    } else if (op.op === 'add' || op.op === 'replace') {
      if (op.op === 'replace' && !(key in parent)) throw new Error(`patch replace ${op.path}: nothing there`);
      parent[key] = op.value;
    } else {
      throw new Error(`unsupported patch op ${op.op}`);
    }
  }
  return copy;
}

function matchesTarget(o: K8sObject, target: K8sObject): boolean {
  const [group, version] = String(o.apiVersion).includes('/') ? String(o.apiVersion).split('/') : ['', o.apiVersion];
  return (
    (target.kind === undefined || target.kind === o.kind) &&
    (target.name === undefined || target.name === o.metadata?.name) &&
    (target.group === undefined || target.group === group) &&
    (target.version === undefined || target.version === version)
  );
}

/**
 * The objects `kubectl kustomize` would emit (before its namespace and image rewrites): the root
 * kustomization's resources plus the given components' resources, with their patches applied.
 * By default the components are those the root kustomization lists.
 */
export function render(components?: string[]): Manifest[] {
  const base = readKustomization(k8sDir);
  const manifests: Manifest[] = [];
  const load = (dir: string, file: string) => {
    for (const object of readYaml(join(dir, file)) as K8sObject[]) {
      manifests.push({ file: posix.normalize(relative(k8sDir, join(dir, file))), object });
    }
  };
  for (const file of base.resources) load(k8sDir, file);
  for (const component of components ?? base.components) {
    const k = readKustomization(join(k8sDir, component));
    if (k.doc.kind !== 'Component') throw new Error(`${component}: not a kustomize Component`);
    for (const file of k.resources) load(k.dir, file);
    for (const patch of k.patches) {
      const ops = readYaml(join(k.dir, patch.path))[0];
      if (!Array.isArray(ops)) throw new Error(`${component}/${patch.path}: only JSON 6902 patches are supported here`);
      const targets = manifests.filter((m) => matchesTarget(m.object, patch.target));
      if (targets.length !== 1) throw new Error(`${component}/${patch.path}: matches ${targets.length} objects`);
      targets[0]!.object = applyJson6902(targets[0]!.object, ops);
    }
  }
  return manifests;
}

/** Schema errors of one object (empty when it is valid), from kubernetes-models. */
export function schemaErrors(object: K8sObject): string[] {
  const info = KINDS[kindKey(object)];
  if (!info) return [`no schema for ${kindKey(object)}`];
  try {
    new info.model(object as never).validate();
    return [];
  } catch (err) {
    return [err instanceof Error ? err.message : String(err)];
  }
}

/**
 * Fields the object's type does not have (and type errors), found by compiling every object as an
 * object literal of its declared type. One program for all objects: the compiler's start-up is
 * the slow part.
 */
export function unknownFieldErrors(manifests: Manifest[]): string[] {
  const imports: string[] = [];
  const aliases = new Map<string, string>();
  const lines: string[] = [];
  const ranges: Array<{ start: number; end: number; manifest: Manifest }> = [];
  for (const [i, m] of manifests.entries()) {
    const info = KINDS[kindKey(m.object)];
    if (!info) return [`${nameOf(m)}: no declaration for ${kindKey(m.object)}`];
    let alias = aliases.get(kindKey(m.object));
    if (!alias) {
      alias = `T${aliases.size}`;
      aliases.set(kindKey(m.object), alias);
      imports.push(`import type { ${info.type} as ${alias} } from '${info.module}';`);
    }
    ranges.push({ start: 0, end: 0, manifest: m });
    lines.push(`export const m${i}: ${alias} = ${JSON.stringify(m.object, null, 2)};`);
  }
  let text = `${imports.join('\n')}\n`;
  for (const [i, line] of lines.entries()) {
    ranges[i]!.start = text.length;
    text += `${line}\n`;
    ranges[i]!.end = text.length;
  }

  const file = join(root, 'test', '.kubernetes-manifests.generated.ts');
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: [],
    strict: true,
    noEmit: true,
    skipLibCheck: true,
  };
  const host = ts.createCompilerHost(options);
  const { getSourceFile, fileExists, readFile } = host;
  host.getSourceFile = (name, language, ...rest) =>
    name === file ? ts.createSourceFile(name, text, language) : getSourceFile.call(host, name, language, ...rest);
  host.fileExists = (name) => name === file || fileExists.call(host, name);
  host.readFile = (name) => (name === file ? text : readFile.call(host, name));
  const program = ts.createProgram([file], options, host);
  const source = program.getSourceFile(file)!;
  const diagnostics = [...program.getSyntacticDiagnostics(source), ...program.getSemanticDiagnostics(source)];
  return diagnostics.map((d) => {
    const owner = ranges.find((r) => d.start !== undefined && d.start >= r.start && d.start < r.end);
    const message = ts.flattenDiagnosticMessageText(d.messageText, ' ');
    return owner ? `${nameOf(owner.manifest)}: ${message}` : message;
  });
}

export function byKind(manifests: Manifest[], kind: string): Manifest[] {
  return manifests.filter((m) => m.object.kind === kind);
}

export function findObject(manifests: Manifest[], kind: string, name: string): K8sObject {
  const found = manifests.find((m) => m.object.kind === kind && m.object.metadata?.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/kubernetes`);
  return found.object;
}

/** Pod templates of the workloads: [manifest, pod spec]. */
export function podSpecs(manifests: Manifest[]): Array<{ manifest: Manifest; pod: K8sObject; labels: Record<string, string> }> {
  return manifests
    .filter((m) => m.object.kind === 'Deployment' || m.object.kind === 'Job')
    .map((manifest) => ({
      manifest,
      pod: manifest.object.spec.template.spec,
      labels: manifest.object.spec.template.metadata?.labels ?? {},
    }));
}

/** True when every key of `selector` is in `labels` with the same value. */
export function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}

/** The containerPort a probe, Service or ServiceMonitor port refers to (by name or by number). */
export function resolveContainerPort(container: K8sObject, port: string | number): number | undefined {
  const ports: K8sObject[] = container.ports ?? [];
  const found = typeof port === 'number' ? ports.find((p) => p.containerPort === port) : ports.find((p) => p.name === port);
  return found?.containerPort;
}

/** ConfigMaps in the manifests by name, for envFrom. */
export function configMaps(manifests: Manifest[]): Map<string, Record<string, string>> {
  return new Map(byKind(manifests, 'ConfigMap').map((m) => [m.object.metadata.name, m.object.data ?? {}]));
}

/**
 * The environment a container gets from the manifests: its ConfigMaps (envFrom), then its `env`
 * (which wins, as in Kubernetes). Secret references get the placeholder from `secrets`.
 */
export function containerEnv(
  manifests: Manifest[],
  container: K8sObject,
  secrets: (name: string, key: string) => string,
): Record<string, string> {
  const maps = configMaps(manifests);
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) {
      const data = maps.get(from.configMapRef.name);
      if (!data) throw new Error(`container ${container.name}: no ConfigMap ${from.configMapRef.name}`);
      Object.assign(env, data);
    } else {
      throw new Error(`container ${container.name}: only configMapRef in envFrom (secrets are named key by key)`);
    }
  }
  for (const e of container.env ?? []) {
    if (e.value !== undefined) env[e.name] = e.value;
    else if (e.valueFrom?.secretKeyRef) env[e.name] = secrets(e.valueFrom.secretKeyRef.name, e.valueFrom.secretKeyRef.key);
    else throw new Error(`container ${container.name}: env ${e.name} has neither a value nor a secretKeyRef`);
  }
  return env;
}

export const kubectlAvailable = (() => {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(join(dir, 'kubectl'))) return true;
  return false;
})();
