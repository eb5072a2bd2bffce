/** A message status as the contract orders it; rank only ever grows for one message. */
export interface MessageStatus {
  value: string;
  rank: number;
  /** Final statuses end reconciliation for the message. */
  final: boolean;
}

/**
 * The momo-communication message status order: accepted < sent < delivered | failed | undelivered.
 * The three last ones share rank 3 and are final: once one is recorded, nothing moves the message.
 */
const STATUSES: Readonly<Record<string, MessageStatus>> = {
  accepted: { value: 'accepted', rank: 1, final: false },
  sent: { value: 'sent', rank: 2, final: false },
  delivered: { value: 'delivered', rank: 3, final: true },
  failed: { value: 'failed', rank: 3, final: true },
  undelivered: { value: 'undelivered', rank: 3, final: true },
};

/** The known status for a provider value, or undefined (the adapter reports `invalid_field`). */
export function messageStatus(value: string): MessageStatus | undefined {
  // hasOwn, so provider values like "constructor" or "__proto__" are not found on the prototype.
  return Object.hasOwn(STATUSES, value) ? STATUSES[value] : undefined;
}

/** Final statuses end reconciliation polling for the message. */
export function isFinal(status: MessageStatus | string): boolean {
  const known = typeof status === 'string' ? messageStatus(status) : status;
  return known?.final ?? false;
}

/**
 * Whether `next` moves a message forward from `current` (undefined: nothing recorded yet).
 * A lower or equal rank does not: it is a late (stale) callback, or a second final status.
 */
export function advances(current: MessageStatus | undefined, next: MessageStatus): boolean {
  return current === undefined || next.rank > current.rank;
}
