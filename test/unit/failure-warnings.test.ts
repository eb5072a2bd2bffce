import { describe, expect, it } from 'vitest';
import { healthView, thresholdsToAnnounce } from '../../src/domain/failure-warnings.js';

describe('thresholdsToAnnounce', () => {
  it.each([
    [null, 50, [0.5]],
    [null, 75, [0.5, 0.75]],
    [null, 90, [0.5, 0.75, 0.9]],
    [50, 50, []],
    [50, 90, [0.75, 0.9]],
    [75, 90, [0.9]],
    [90, 90, []],
  ] as const)('warned at %s, reached %s: announces %j', (warned, reached, expected) => {
    expect(thresholdsToAnnounce(warned, reached)).toEqual(expected);
  });
});

describe('healthView', () => {
  it('is all null while the endpoint is healthy', () => {
    expect(healthView({ failingSince: null, warnedPercent: null }, 100)).toEqual({ failingSince: null, warnedThreshold: null, autoDisableAt: null });
  });

  it('shows the streak, the share warned and when the window ends', () => {
    const since = new Date('2026-12-02T10:00:00.000Z');
    expect(healthView({ failingSince: since, warnedPercent: 75 }, 3600)).toEqual({
      failingSince: '2026-12-02T10:00:00.000Z',
      warnedThreshold: 0.75,
      autoDisableAt: '2026-12-02T11:00:00.000Z',
    });
    expect(healthView({ failingSince: since, warnedPercent: null }, 60).warnedThreshold).toBeNull();
  });
});
