import { expect } from 'vitest';
import type { ApiResponse } from './http.js';
import type { TestTenant } from './platform.js';

/**
 * Asserts the contract's error shape and the status: `{"error":{"code","message"}}`, plus for a
 * validation error `details: [{path, message}]` listing at least one problem, and nothing else.
 */
export function expectError(res: ApiResponse, status: number, code: string): void {
  const details = code === 'validation_failed' || res.body?.error?.details !== undefined ? { details: expect.any(Array) } : {};
  expect({ status: res.status, body: res.body }).toEqual({ status, body: { error: { code, message: expect.any(String), ...details } } });
  if ('details' in details) {
    expect(res.body.error.details.length).toBeGreaterThan(0);
    for (const problem of res.body.error.details) expect(problem).toEqual({ path: expect.any(String), message: expect.any(String) });
  }
}

/** Publishes an event through the tenant API and returns its id; fails the test on any other answer. */
export async function publish(
  tenant: TestTenant,
  body: { type: string; messageId?: string; data?: unknown },
  idempotencyKey?: string,
): Promise<string> {
  const res = await tenant.call('POST', '/v1/events', {
    body: { data: {}, ...body },
    headers: idempotencyKey ? { 'idempotency-key': idempotencyKey } : {},
  });
  expect(res.status, res.text).toBe(202);
  return res.body.id as string;
}

/** Reads every page of a list route, following nextCursor. */
export async function listAll<T = any>(tenant: TestTenant, path: string, limit = 2): Promise<{ items: T[]; pages: number }> {
  const items: T[] = [];
  let cursor: string | null = null;
  let pages = 0;
  const sep = path.includes('?') ? '&' : '?';
  do {
    const res: ApiResponse = await tenant.call('GET', `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.length).toBeLessThanOrEqual(limit);
    items.push(...(res.body.data as T[]));
    cursor = res.body.nextCursor as string | null;
    pages++;
    if (pages > 1000) throw new Error(`pagination of ${path} does not end`);
  } while (cursor !== null);
  return { items, pages };
}
