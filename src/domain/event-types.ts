/**
 * Endpoint subscription filter: empty means every type; `order.*` matches `order.created` and
 * `order.item.added` but not `order` itself or `orders.x`.
 */
export function matchesEventType(filters: readonly string[], type: string): boolean {
  if (filters.length === 0) return true;
  return filters.some((f) => {
    const prefix = eventTypePrefix(f);
    return prefix === undefined ? f === type : type.startsWith(prefix);
  });
}

/** `order.*` → `order.` (what a matching type starts with); undefined for an exact type. */
export function eventTypePrefix(filter: string): string | undefined {
  return filter.endsWith('.*') ? filter.slice(0, -1) : undefined;
}

export const eventTypeFilterPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?$/;
