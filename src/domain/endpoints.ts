/**
 * The words of an endpoint's settings. `paused` starts no attempt and keeps waiting work (and new
 * events) pending until it is resumed; `disabled` stops all sending and dead-letters waiting work
 * (`endpoint_disabled`); `per-message` ordering sends one delivery at a time per message.
 */
export const ENDPOINT_STATUSES = ['active', 'paused', 'disabled'] as const;
export type EndpointStatus = (typeof ENDPOINT_STATUSES)[number];

export const ORDERINGS = ['none', 'per-message'] as const;
export type Ordering = (typeof ORDERINGS)[number];
