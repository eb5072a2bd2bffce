import { once } from 'node:events';
import { spawnTs, type Child } from './children.js';

export interface ReceiverCounts {
  /** Requests that arrived at each port, in the order of okPorts then hangPorts. */
  counts: number[];
  firstAt: number | null;
  lastAt: number | null;
}

/** The parent's handle on receiver-process.ts: ports, counters and arrival times over IPC. */
export class Receiver {
  private nextId = 1;
  private readonly pending = new Map<number, (body: unknown) => void>();

  private constructor(
    readonly child: Child,
    readonly okPorts: number[],
    readonly hangPorts: number[],
  ) {
    child.process.on('message', (message: { id?: number; body?: unknown }) => {
      if (message.id === undefined) return;
      this.pending.get(message.id)?.(message.body);
      this.pending.delete(message.id);
    });
  }

  static async start(okPorts: number, hangPorts: number): Promise<Receiver> {
    const child = spawnTs('receiver', 'bench/lib/receiver-process.ts', [String(okPorts), String(hangPorts)], { ipc: true });
    const [ready] = (await Promise.race([
      once(child.process, 'message'),
      once(child.process, 'exit').then(() => {
        throw new Error(`receiver exited:\n${child.output()}`);
      }),
    ])) as [{ ok: number[]; hang: number[] }];
    return new Receiver(child, ready.ok, ready.hang);
  }

  okUrl(index: number, path = ''): string {
    const port = this.okPorts[index];
    if (port === undefined) throw new Error(`receiver has no ok port #${index}`);
    return `http://127.0.0.1:${port}/${path}`;
  }

  hangUrl(index = 0, path = ''): string {
    const port = this.hangPorts[index];
    if (port === undefined) throw new Error(`receiver has no hang port #${index}`);
    return `http://127.0.0.1:${port}/${path}`;
  }

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
  /** Arrival times recorded since the last call, as [webhook-id, epoch ms]. */
  arrivals = () => this.call<Array<[string, number]>>({ cmd: 'arrivals' });

  /** Requests that reached the first `n` ok ports. */
  async okTotal(n = this.okPorts.length): Promise<number> {
    const { counts } = await this.counts();
    return counts.slice(0, n).reduce((a, b) => a + b, 0);
  }

  stop = () => this.child.stop(5_000);
}
