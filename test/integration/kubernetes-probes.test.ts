/**
 * The paths and ports deploy/kubernetes points Kubernetes and Prometheus at exist in the app: the
 * api and worker roles are started for real, and every probe of their Deployments, the Services'
 * target ports and the ServiceMonitor's scrape path are requested from the role that serves them.
 * (The static agreement of the manifests with each other is test/unit/kubernetes-manifests.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WORKER_NODE_FLAGS } from '../../src/config/node-flags.js';
import { METRIC_NAMES } from '../../src/metrics/registry.js';
import { request } from '../helpers/http.js';
import { byKind, findObject, render, resolveContainerPort, selects, OPTIONAL_COMPONENTS, type K8sObject } from '../helpers/kubernetes.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';

const manifests = render(OPTIONAL_COMPONENTS);
const roles = ['api', 'worker'] as const;
const platforms: Partial<Record<(typeof roles)[number], TestPlatform>> = {};

beforeAll(async () => {
  platforms.api = await startTestPlatform({ role: 'api' });
  platforms.worker = await startTestPlatform({ role: 'worker', database: platforms.api.database, queuePrefix: platforms.api.queuePrefix });
});

afterAll(async () => {
  await platforms.worker?.stop();
  await platforms.api?.stop();
});

const deploymentOf = (role: string): K8sObject => findObject(manifests, 'Deployment', `webhook-relay-${role}`);
const containerOf = (role: string): K8sObject => deploymentOf(role).spec.template.spec.containers[0];
/** The PORT the manifest gives the container (the app listens there). */
const portEnv = (role: string): number => Number(containerOf(role).env.find((e: K8sObject) => e.name === 'PORT')?.value);

describe.each(roles)('%s Deployment', (role) => {
  it('runs the role it is started as', () => {
    expect(containerOf(role).command).toEqual(['node', ...(role === 'worker' ? WORKER_NODE_FLAGS : []), 'dist/main.js', role]);
    expect(deploymentOf(role).spec.template.metadata.labels['app.kubernetes.io/component']).toBe(role);
  });

  it.each(['startupProbe', 'livenessProbe', 'readinessProbe'])('%s: its port is the PORT container port, its path answers 200', async (probe) => {
    const container = containerOf(role);
    const get = container[probe]?.httpGet;
    expect(get, probe).toBeDefined();
    expect(Number.isInteger(portEnv(role))).toBe(true);
    expect(resolveContainerPort(container, get.port)).toBe(portEnv(role));
    expect(get.scheme ?? 'HTTP').toBe('HTTP');
    const res = await request(platforms[role]!.url, 'GET', get.path);
    expect(res.status, `${role} ${probe} GET ${get.path}: ${res.text}`).toBe(200);
  });
});

describe('Services and ServiceMonitor', () => {
  it('each Service targets a container port of the role that serves it', async () => {
    for (const service of byKind(manifests, 'Service')) {
      const role = roles.find((r) => selects(service.object.spec.selector, deploymentOf(r).spec.template.metadata.labels));
      expect(role, service.object.metadata.name).toBeDefined();
      for (const port of service.object.spec.ports) expect(resolveContainerPort(containerOf(role!), port.targetPort)).toBe(portEnv(role!));
      // The role behind it is up on that port's paths.
      expect((await request(platforms[role!]!.url, 'GET', '/healthz')).status).toBe(200);
    }
  });

  it('the scrape path serves Prometheus metrics on both roles, including the gauge KEDA scales on', async () => {
    const monitor = findObject(manifests, 'ServiceMonitor', 'webhook-relay');
    const scaled = findObject(manifests, 'ScaledObject', 'webhook-relay-worker');
    const [metric] = /webhook_[a-z_]+/.exec(scaled.spec.triggers[0].metadata.query) ?? [];
    expect(metric).toBe(METRIC_NAMES.dispatchBacklog);
    for (const endpoint of monitor.spec.endpoints) {
      for (const role of roles) {
        const service = byKind(manifests, 'Service').find((s) => selects(s.object.spec.selector, deploymentOf(role).spec.template.metadata.labels))!;
        const port = service.object.spec.ports.find((p: K8sObject) => p.name === endpoint.port);
        expect(resolveContainerPort(containerOf(role), port.targetPort)).toBe(portEnv(role));
        const res = await request(platforms[role]!.url, 'GET', endpoint.path);
        expect(res.status, `${role} GET ${endpoint.path}`).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
        // A gauge with no labels of its own: the query's max() sees one series per pod.
        expect(res.text).toContain(`# TYPE ${metric} gauge`);
        expect(res.text).toMatch(new RegExp(`^${metric} \\d+`, 'm'));
      }
    }
  });

  it('the worker serves only the ops routes, so its Service is for scraping alone', async () => {
    expect((await request(platforms.worker!.url, 'GET', '/v1/endpoints')).status).toBe(404);
    expect((await request(platforms.api!.url, 'GET', '/v1/endpoints')).status).toBe(401);
  });
});
