import { performance } from 'node:perf_hooks';

/**
 * Epoch milliseconds with sub-millisecond resolution, for times that two processes of the bench
 * compare (a 202 read by the load generator, its arrival at the receiver). Date.now() counts whole
 * milliseconds: a latency of two of them is off by up to 1 ms, a sixth of a 6 ms p99, and the
 * fairness ratios divide by such a p99. Each process adds its monotonic clock to the wall-clock
 * time it started at, so two processes agree to well under a millisecond unless the wall clock is
 * stepped while they run; every time the bench compares with these is read here too.
 */
export const epochMs = (): number => performance.timeOrigin + performance.now();
