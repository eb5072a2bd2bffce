import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnTs, type Child } from './children.js';

export interface ReceiverCounts {
  /** Requests that arrived at each port, in the order of okPorts, hangPorts, flakyPorts. */
  counts: number[];
  firstAt: number | null;
  lastAt: number | null;
}

/** One recorded request: webhook-id, epoch ms at arrival, HTTP status answered (0: never answered). */
export type Arrival = [id: string, at: number, status: number];

/** The parent's handle on receiver-process.ts: ports, counters and arrival times over IPC. */
export class Receiver {
  private nextId = 1;
  private readonly pending = new Map<number, (body: unknown) => void>();

  private constructor(
    readonly child: Child,
    readonly okPorts: number[],
    readonly hangPorts: number[],
    readonly flakyPorts: number[],
  ) {
    child.process.on('message', (message: { id?: number; body?: unknown }) => {
      if (message.id === undefined) return;
      this.pending.get(message.id)?.(message.body);
      this.pending.delete(message.id);
    });
  }

  static async start(okPorts: number, hangPorts: number, flakyPorts = 0): Promise<Receiver> {
    const child = spawnTs('receiver', 'bench/lib/receiver-process.ts', [String(okPorts), String(hangPorts), String(flakyPorts)], { ipc: true });
    const [ready] = (await Promise.race([
      once(child.process, 'message'),
      once(child.process, 'exit').then(() => {
        throw new Error(`receiver exited:\n${child.output()}`);
      }),
    ])) as [{ ok: number[]; hang: number[]; flaky: number[] }];
    return new Receiver(child, ready.ok, ready.hang, ready.flaky);
  }

  okUrl = (index: number, path = '') => portUrl(this.okPorts, 'ok', index, path);
  hangUrl = (index = 0, path = '') => portUrl(this.hangPorts, 'hang', index, path);
  /** A port that answers 500 to every tenth request it receives (since the last reset), 200 otherwise. */
  flakyUrl = (index = 0, path = '') => portUrl(this.flakyPorts, 'flaky', index, path);

  private call<T>(command: Record<string, unknown>): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve) => {
      this.pending.set(id, resolve as (body: unknown) => void);
      this.child.process.send({ id, ...command });
    });
  }

  counts = () => this.call<ReceiverCounts>({ cmd: 'counts' });
  reset = () => this.call<boolean>({ cmd: 'reset' });
  record = (on: boolean) => this.call<boolean>({ cmd: 'record', on });
  /** Requests recorded since the last call. */
  arrivals = () => this.call<Arrival[]>({ cmd: 'arrivals' });

  /**
   * Moves recorded requests into `into` every `everyMs` until the returned function is called (it
   * takes what is left, then resolves), so a long stream never piles up in the receiver or crosses
   * IPC in one message.
   */
  collectArrivals(into: Arrival[], everyMs = 1_000): () => Promise<void> {
    let stopped = false;
    const take = async () => {
      for (const arrival of await this.arrivals()) into.push(arrival);
    };
    const loop = (async () => {
      while (!stopped) {
        await take();
        await sleep(everyMs);
      }
      await take();
    })();
    return async () => {
      stopped = true;
      await loop;
    };
  }

  /** Requests that reached the first `n` ok ports. */
  async okTotal(n = this.okPorts.length): Promise<number> {
    const { counts } = await this.counts();
    return counts.slice(0, n).reduce((a, b) => a + b, 0);
  }

  stop = () => this.child.stop(5_000);
}

function portUrl(ports: number[], kind: string, index: number, path: string): string {
  const port = ports[index];
  if (port === undefined) throw new Error(`receiver has no ${kind} port #${index}`);
  return `http://127.0.0.1:${port}/${path}`;
}
