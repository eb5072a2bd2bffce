import { describe, expect, it } from 'vitest';
import { countsTowardLatencyObjective, FIRST_ATTEMPT_OBJECTIVE_SECONDS, type HeldState } from '../../src/domain/slo.js';

const now = new Date('2026-12-02T12:00:00Z');
const accepted = new Date(now.getTime() - 60_000);
const up: HeldState = { releasedAt: null, consecutiveFailures: 0, circuitOpenUntil: null };
const counts = (delay: number, endpoint = up) => countsTowardLatencyObjective(delay, accepted, endpoint, 5, now);

describe('the delivery-latency objective counts first attempts for endpoints that are up', () => {
  it('counts every attempt on time, whatever the endpoint', () => {
    expect(counts(FIRST_ATTEMPT_OBJECTIVE_SECONDS, { ...up, consecutiveFailures: 9 })).toBe(true);
  });

  it('counts a late attempt to an endpoint that was never held', () => {
    expect(counts(60)).toBe(true);
    expect(counts(60, { ...up, releasedAt: new Date(accepted.getTime() - 1) })).toBe(true);
  });

  it('leaves out a late attempt whose endpoint let held work go after the event was accepted', () => {
    expect(counts(60, { ...up, releasedAt: new Date(accepted.getTime() + 1) })).toBe(false);
  });

  it('leaves out a late attempt while the circuit is open or half-open', () => {
    expect(counts(60, { ...up, consecutiveFailures: 5, circuitOpenUntil: new Date(now.getTime() + 1000) })).toBe(false);
    expect(counts(60, { ...up, consecutiveFailures: 5 })).toBe(false);
    expect(counts(60, { ...up, consecutiveFailures: 4 })).toBe(true);
  });
});
