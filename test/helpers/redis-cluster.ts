/**
 * A private, throw-away Redis Cluster on free loopback ports: three masters with one replica each,
 * no persistence, and a short node timeout so that a killed master is replaced within seconds.
 * Like redis-server.ts it never touches the shared Redis on 6379.
 *
 *   const cluster = await startRedisCluster();
 *   env.REDIS_CLUSTER_NODES = cluster.seeds;
 *   const victim = await cluster.masterOf(slot);   // the port serving a slot
 *   await cluster.kill(victim);                    // SIGKILL
 *   await cluster.waitForFailover(victim);         // its replica took over, cluster_state:ok again
 *   await cluster.stop();
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { closedPort } from './dispatch.js';
import { eventually } from './platform.js';

const run = promisify(execFile);

export interface ClusterNodeInfo {
  id: string;
  port: number;
  role: 'master' | 'replica';
  /** Flagged as failed by the cluster (a dead node stays listed). */
  failed: boolean;
  /** Id of the master a replica follows. */
  masterId: string | undefined;
  /** Slot ranges a master serves, inclusive. */
  slots: [number, number][];
}

export interface RedisCluster {
  /** Every node's port, in start order. */
  ports: number[];
  /** The value for REDIS_CLUSTER_NODES: every node as 127.0.0.1:port. */
  seeds: string;
  /** The nodes as one live node sees them (CLUSTER NODES). */
  nodes(): Promise<ClusterNodeInfo[]>;
  /** Port of the live master serving `slot`. */
  masterOf(slot: number): Promise<number>;
  /** Runs one redis-cli command against a node and returns its output. */
  cli(port: number, ...args: string[]): Promise<string>;
  /** Ends one node at once (SIGKILL) and waits for it to be gone. */
  kill(port: number): Promise<void>;
  /** Waits until a replica of the dead master serves its slots and every live node says cluster_state:ok; returns its port. */
  waitForFailover(deadPort: number, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

export interface RedisClusterOptions {
  /** cluster-node-timeout: how long a master may be unreachable before its replica takes over. */
  nodeTimeoutMs?: number;
}

interface NodeProcess {
  port: number;
  child: ChildProcess;
  exited: Promise<unknown>;
  output: () => string;
}

const alive = (n: NodeProcess) => n.child.exitCode === null && n.child.signalCode === null;

async function startNode(dir: string, nodeTimeoutMs: number): Promise<NodeProcess> {
  // The cluster bus port is set explicitly: port + 10000, Redis's default, may be taken or above 65535.
  const [port, busPort] = [await closedPort(), await closedPort()];
  const args = [
    '--port', String(port), '--cluster-port', String(busPort), '--bind', '127.0.0.1',
    '--cluster-enabled', 'yes', '--cluster-config-file', join(dir, `nodes-${port}.conf`),
    '--cluster-node-timeout', String(nodeTimeoutMs), '--dir', dir,
    '--save', '', '--appendonly', 'no', '--daemonize', 'no',
    // A master would wait 5 s for more replicas before it starts the first sync.
    '--repl-diskless-sync-delay', '0',
  ];
  const child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = once(child, 'exit');
  await eventually(
    async () => {
      if (child.exitCode !== null) throw new Error(`cluster node on ${port} exited early:\n${out}`);
      return out.includes('Ready to accept connections');
    },
    `cluster node on ${port} ready`,
    15_000,
    20,
  );
  return { port, child, exited, output: () => out };
}

/** A free port can be taken by someone else before the node binds it: then two more tries. */
async function startNodeRetrying(dir: string, nodeTimeoutMs: number): Promise<NodeProcess> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNode(dir, nodeTimeoutMs);
    } catch (err) {
      if (attempt === 3 || !/Address already in use/.test((err as Error).message)) throw err;
    }
  }
}

/** Parses CLUSTER NODES: `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link> <slot>...`. */
function parseNodes(text: string): ClusterNodeInfo[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, master, , , , , ...slots] = line.trim().split(' ');
      const flagList = flags!.split(',');
      return {
        id: id!,
        port: Number(/:(\d+)@/.exec(address!)![1]),
        role: flagList.includes('master') ? 'master' : 'replica',
        failed: flagList.includes('fail'),
        masterId: master === '-' ? undefined : master,
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [from, to] = s.split('-').map(Number);
            return [from!, to ?? from!] as [number, number];
          }),
      };
    });
}

export async function startRedisCluster(opts: RedisClusterOptions = {}): Promise<RedisCluster> {
  const nodeTimeoutMs = opts.nodeTimeoutMs ?? 1_000;
  const dir = mkdtempSync(join(tmpdir(), 'whr-redis-cluster-'));
  const processes: NodeProcess[] = [];
  /** Replicas of each killed master, as they were just before the kill. */
  const replicasOf = new Map<number, number[]>();
  // A test process that ends without stop() must not leave servers behind.
  const killAll = () => processes.filter(alive).forEach((n) => n.child.kill('SIGKILL'));
  process.once('exit', killAll);

  const cli = async (port: number, ...args: string[]) =>
    (await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 5_000 })).stdout;
  const live = () => processes.filter(alive);
  const nodes = async () => parseNodes(await cli(live()[0]!.port, 'cluster', 'nodes'));
  const clusterOk = async (port: number) => /^cluster_state:ok\r?$/m.test(await cli(port, 'cluster', 'info'));

  const stop = async () => {
    killAll();
    await Promise.all(processes.map((n) => n.exited));
    process.removeListener('exit', killAll);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    for (let i = 0; i < 6; i++) processes.push(await startNodeRetrying(dir, nodeTimeoutMs));
    const addresses = processes.map((n) => `127.0.0.1:${n.port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '1', '--cluster-yes'], { timeout: 60_000 });
    // Ready for the tests only when every node agrees and every replica has synced with its master:
    // a replica that never synced would refuse to take over.
    await eventually(
      async () => {
        for (const n of processes) {
          if (!(await clusterOk(n.port))) return false;
          const replication = await cli(n.port, 'info', 'replication');
          if (replication.includes('role:slave') && !/master_link_status:up/.test(replication)) return false;
        }
        const known = await nodes();
        return known.length === 6 && known.filter((n) => n.role === 'master' && n.slots.length > 0).length === 3;
      },
      'Redis Cluster formed (cluster_state:ok on every node, replicas in sync)',
      30_000,
      100,
    );
  } catch (err) {
    const logs = processes.map((n) => `--- node ${n.port}\n${n.output().slice(-2_000)}`).join('\n');
    await stop();
    throw new Error(`${(err as Error).message}\n${logs}`);
  }

  return {
    ports: processes.map((n) => n.port),
    seeds: processes.map((n) => `127.0.0.1:${n.port}`).join(','),
    nodes,
    cli,
    async masterOf(slot) {
      const master = (await nodes()).find((n) => n.role === 'master' && !n.failed && n.slots.some(([from, to]) => slot >= from && slot <= to));
      if (!master) throw new Error(`no live master serves slot ${slot}`);
      return master.port;
    },
    async kill(port) {
      const node = processes.find((n) => n.port === port);
      if (!node) throw new Error(`no cluster node on ${port}`);
      const known = await nodes();
      const id = known.find((n) => n.port === port)?.id;
      replicasOf.set(port, known.filter((n) => n.masterId !== undefined && n.masterId === id).map((n) => n.port));
      if (alive(node)) node.child.kill('SIGKILL');
      await node.exited;
    },
    async waitForFailover(deadPort, timeoutMs = 30_000) {
      const replicas = replicasOf.get(deadPort) ?? [];
      if (replicas.length === 0) throw new Error(`the node on ${deadPort} was not a master with a replica when it was killed`);
      return eventually(
        async () => {
          for (const n of live()) if (!(await clusterOk(n.port))) return undefined;
          const promoted = (await nodes()).find((n) => replicas.includes(n.port) && n.role === 'master' && !n.failed && n.slots.length > 0);
          return promoted?.port;
        },
        `failover of the master on ${deadPort}`,
        timeoutMs,
        100,
      );
    },
    stop,
  };
}
