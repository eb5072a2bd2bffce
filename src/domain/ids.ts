import { TypeID, typeid } from 'typeid-js';

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

/**
 * The uuid a TypeID of this kind encodes, as PostgreSQL stores endpoint ids (docs/architecture.md,
 * "Ids in the database"); null when `value` is not such a TypeID, so that a malformed id in a
 * request answers as any id that names nothing does.
 */
export function uuidOfId(kind: IdKind, value: string): string | null {
  if (!isIdOf(kind, value)) return null;
  try {
    return TypeID.fromString(value, idPrefixes[kind]).toUUID();
  } catch {
    return null;
  }
}

/** `uuidOfId` for an id the platform made or already read back: a malformed one is a bug. */
export function uuidOf(kind: IdKind, id: string): string {
  const uuid = uuidOfId(kind, id);
  if (uuid === null) throw new TypeError(`not a TypeID of kind ${kind}: ${JSON.stringify(id)}`);
  return uuid;
}

/** The TypeID of this kind that a stored uuid encodes. */
export function idOfUuid(kind: IdKind, uuid: string): string {
  return TypeID.fromUUID(idPrefixes[kind], uuid).toString();
}
