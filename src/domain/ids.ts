import { typeid } from 'typeid-js';

/** Identity prefixes from the contract; TypeIDs are URL-safe and sort by creation time. */
export const idPrefixes = {
  tenant: 'ten',
  apiKey: 'key',
  source: 'src',
  endpoint: 'ep',
  receipt: 'rcp',
  event: 'evt',
  delivery: 'dlv',
  attempt: 'att',
  audit: 'aud',
  replay: 'rpl',
  portalSession: 'ps',
} as const;

export type IdKind = keyof typeof idPrefixes;

export function newId(kind: IdKind): string {
  return typeid(idPrefixes[kind]).toString();
}

/** True when `value` looks like an id of that kind; used to answer 404 early for foreign shapes. */
export function isIdOf(kind: IdKind, value: string): boolean {
  return value.startsWith(`${idPrefixes[kind]}_`) && value.length <= 64;
}
