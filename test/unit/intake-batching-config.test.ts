import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { configError, requiredEnv } from '../helpers/config.js';
import { RecentMap, RecentSet } from '../../src/domain/recent.js';

describe('intake group commit settings', () => {
  it('defaults to 64 callbacks per statement and 2 statements in flight', () => {
    expect(loadConfig(requiredEnv).intakeBatching).toEqual({ maxBatch: 64, maxInFlight: 2 });
  });

  it('takes one statement per callback: a batch of 1 and as many in flight as the pool has connections', () => {
    expect(loadConfig({ ...requiredEnv, INTAKE_BATCH_MAX: '1', INTAKE_STATEMENTS_IN_FLIGHT: '20' }).intakeBatching).toEqual({ maxBatch: 1, maxInFlight: 20 });
  });

  it('refuses more statements in flight than pooled connections, and values out of range', () => {
    expect(configError({ INTAKE_STATEMENTS_IN_FLIGHT: '21' })).toBe('invalid configuration: INTAKE_STATEMENTS_IN_FLIGHT: must not exceed DB_POOL_MAX (20)');
    expect(configError({ INTAKE_BATCH_MAX: '0' })).toMatch(/^invalid configuration: INTAKE_BATCH_MAX: /);
    expect(configError({ INTAKE_BATCH_MAX: '1001' })).toMatch(/^invalid configuration: INTAKE_BATCH_MAX: /);
  });
});

describe('RecentSet', () => {
  it('forgets the key added longest ago once full, and re-adding a key makes it the newest', () => {
    const recent = new RecentSet(3);
    for (const k of ['a', 'b', 'c']) recent.add(k);
    recent.add('a'); // a is now the newest; b the oldest
    recent.add('d');
    expect(['a', 'b', 'c', 'd'].filter((k) => recent.has(k))).toEqual(['a', 'c', 'd']);
    expect(recent.size).toBe(3);
  });
});

describe('RecentMap', () => {
  it('forgets the key set longest ago once full, and setting a key again makes it the newest', () => {
    const recent = new RecentMap<number>(3);
    for (const [k, v] of [['a', 1], ['b', 2], ['c', 3]] as const) recent.set(k, v);
    recent.set('a', 10); // a is now the newest, with its new value; b the oldest
    recent.set('d', 4);
    expect(['a', 'b', 'c', 'd'].map((k) => recent.get(k))).toEqual([10, undefined, 3, 4]);
  });
});

describe('DB_POOL_MIN', () => {
  it('opens the whole pool before ready by default, and refuses more than DB_POOL_MAX', () => {
    expect(loadConfig(requiredEnv).dbPoolMin).toBe(20);
    expect(loadConfig({ ...requiredEnv, DB_POOL_MAX: '8' }).dbPoolMin).toBe(8);
    expect(loadConfig({ ...requiredEnv, DB_POOL_MIN: '0' }).dbPoolMin).toBe(0);
    expect(configError({ DB_POOL_MIN: '21' })).toBe('invalid configuration: DB_POOL_MIN: must not exceed DB_POOL_MAX (20)');
  });
});
