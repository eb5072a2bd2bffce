/**
 * Endpoint subscription filter: empty means every type; `order.*` matches `order.created` and
 * `order.item.added` but not `order` itself or `orders.x`.
 */
export function matchesEventType(filters: readonly string[], type: string): boolean {
  if (filters.length === 0) return true;
  return filters.some((f) => (f.endsWith('.*') ? type.startsWith(f.slice(0, -1)) : f === type));
}

export const eventTypeFilterPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?$/;
