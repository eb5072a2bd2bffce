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

/**
 * Whether every type `filters` matches is matched by `scope` too, both read as endpoint
 * subscriptions: `order.created` and `order.item.*` are within `order.*`; `order.*` is not within
 * `order.created`. Empty filters match every type, so only an empty scope holds them.
 */
export function typeFiltersWithin(filters: readonly string[], scope: readonly string[]): boolean {
  if (scope.length === 0) return true;
  if (filters.length === 0) return false;
  return filters.every((f) => {
    const matched = eventTypePrefix(f);
    return scope.some((s) => {
      const prefix = eventTypePrefix(s);
      return prefix === undefined ? matched === undefined && s === f : (matched ?? f).startsWith(prefix);
    });
  });
}

/** `order.*` → `order.` (what a matching type starts with); undefined for an exact type. */
export function eventTypePrefix(filter: string): string | undefined {
  return filter.endsWith('.*') ? filter.slice(0, -1) : undefined;
}

export const eventTypeFilterPattern = /^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*(\.\*)?$/;
