/**
 * V8 flags the worker role is started with (`node <flags> dist/main.js worker`): docker-compose.yml,
 * deploy/kubernetes/worker-deployment.yaml, `npm run start:worker` and the bench all use these, and
 * test/unit/compose.test.ts and kubernetes-manifests.test.ts hold them to it.
 *
 * A semi-space of 4 MiB instead of V8's 16 MiB: the young generation grew to its maximum (32 MiB
 * committed) during start-up and stayed there, a third of an idle worker's memory, and it is as
 * large again under a backlog. The worker's objects are short-lived (one attempt), so the smaller
 * nursery costs more frequent but cheaper scavenges; docs/performance.md (2026-12-02) has both sides.
 */
export const WORKER_NODE_FLAGS = ['--max-semi-space-size=4'] as const;
