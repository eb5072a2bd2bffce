/**
 * Runs `task` now, or, when called while it runs, once more right after: any number of calls during
 * one run collapse into a single next run. For idempotent signals (a wake-up) whose every caller
 * needs a run that starts after its call, and none more.
 */
export function coalesced(task: () => Promise<unknown>): () => void {
  let running = false;
  let again = false;
  const start = (): void => {
    running = true;
    again = false;
    void task()
      .catch(() => undefined)
      .finally(() => {
        running = false;
        if (again) start();
      });
  };
  return () => {
    if (running) again = true;
    else start();
  };
}
