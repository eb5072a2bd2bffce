/**
 * `work`, or a rejection once `ms` have passed without it (the work itself goes on; the caller stops
 * waiting). The timer is cleared either way and never holds the process open.
 */
export async function within<T>(ms: number, work: Promise<T>, what = 'work'): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
