import { describe, expect, it } from 'vitest';
import { coalesced } from '../../src/infra/coalesce.js';

function gate() {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

describe('coalesced', () => {
  it('runs at once when idle; calls during a run become exactly one more run, started after them', async () => {
    const runs: Array<ReturnType<typeof gate>> = [];
    const signal = coalesced(() => {
      const g = gate();
      runs.push(g);
      return g.promise;
    });
    signal();
    expect(runs).toHaveLength(1);
    signal();
    signal();
    signal();
    expect(runs).toHaveLength(1); // still the first run
    runs[0]!.open();
    await new Promise((r) => setTimeout(r, 0));
    expect(runs).toHaveLength(2); // one run for the three calls
    runs[1]!.open();
    await new Promise((r) => setTimeout(r, 0));
    expect(runs).toHaveLength(2); // nothing was asked during the second run
    signal();
    expect(runs).toHaveLength(3);
  });

  it('a failing run does not stop later runs', async () => {
    let calls = 0;
    const signal = coalesced(async () => {
      calls++;
      throw new Error('down');
    });
    signal();
    signal();
    await new Promise((r) => setTimeout(r, 0));
    await new Promise((r) => setTimeout(r, 0));
    expect(calls).toBe(2);
  });
});
