/**
 * V8 flags the worker role is started with (`node <flags> dist/main.js worker`): docker-compose.yml,
 * deploy/kubernetes/worker-deployment.yaml, `npm run start:worker` and the bench all use these, and
 * test/unit/compose.test.ts and kubernetes-manifests.test.ts hold them to it.
 *
 * A semi-space of 4 MiB instead of V8's 16 MiB: the young generation grew to its maximum (32 MiB
 * committed) during start-up and stayed there, a third of an idle worker's memory, and it is as
 * large again under a backlog. Two V8 background threads instead of Node's 4, as many as the
 * worker's CPU limit in deploy/kubernetes: each idle thread keeps a stack and a malloc arena.
 * What each saves and costs is in docs/performance.md, "Memory and a warm start (2026-12-02)".
 */
export const WORKER_NODE_FLAGS = ['--max-semi-space-size=4', '--v8-pool-size=2'] as const;
