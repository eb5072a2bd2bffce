import { typeid } from 'typeid-js';
import { v7 as uuidv7 } from 'uuid';

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

/**
 * A new id as the stores keep it: the UUIDv7 a TypeID would encode, drawn as typeid-js draws its own
 * (uuid's v7, in creation order within the process), for an id that goes straight into a row.
 * Through `newId` it would be written as a TypeID and read back, several times the cost, on intake's
 * path (docs/performance.md, "Delivery ids as uuid"). `idOfUuid` names it for the API.
 */
export function newStoredId(): string {
  return uuidv7();
}

/**
 * The nil uuid: below every id the stores keep as a uuid, and no id's (a UUIDv7 carries its
 * version), so a range with no lower bound starts here and a warm-up names nothing with it.
 */
export const lowestStoredId = '00000000-0000-0000-0000-000000000000';

/** True when `value` looks like an id of that kind; used to answer 404 early for foreign shapes. */
export function isIdOf(kind: IdKind, value: string): boolean {
  return value.startsWith(`${idPrefixes[kind]}_`) && value.length <= 64;
}

/** Crockford's base32 as TypeIDs spell their 26 characters: 3 bits, then 25 groups of 5. */
export const typeidAlphabet = '0123456789abcdefghjkmnpqrstvwxyz';
const letterValue = new Int8Array(128).fill(-1);
for (let i = 0; i < typeidAlphabet.length; i++) letterValue[typeidAlphabet.charCodeAt(i)] = i;
const hexDigits = '0123456789abcdef';
const hexValue = new Int8Array(128);
for (let i = 0; i < 16; i++) hexValue[hexDigits.charCodeAt(i)] = i;

/**
 * The uuid a TypeID of this kind encodes, as PostgreSQL stores endpoint ids (docs/architecture.md,
 * "Ids in the database"); null when `value` is not such a TypeID, so that a malformed id in a
 * request answers as any id that names nothing does. By hand, bit by bit, rather than through
 * typeid-js, whose bigint arithmetic cost several times as much on the path of every delivery
 * (docs/performance.md, "Endpoint ids as uuid"); test/unit/ids.test.ts holds both to one answer.
 */
export function uuidOfId(kind: IdKind, value: string): string | null {
  const start = idPrefixes[kind].length + 1;
  if (value.length !== start + 26 || !isIdOf(kind, value)) return null;
  const nibbles = new Uint8Array(32);
  for (let i = 0; i < 26; i++) {
    const v = letterValue[value.charCodeAt(start + i)] ?? -1;
    if (v < 0 || (i === 0 && v > 7)) return null;
    for (let k = 0; k < 5; k++) {
      const b = 5 * i - 2 + k;
      if (b >= 0 && (v >> (4 - k)) & 1) nibbles[b >> 2]! |= 8 >> (b & 3);
    }
  }
  let uuid = '';
  for (let j = 0; j < 32; j++) uuid += (j === 8 || j === 12 || j === 16 || j === 20 ? '-' : '') + hexDigits[nibbles[j]!];
  return uuid;
}

/** `uuidOfId` for an id the platform made or already read back: a malformed one is a bug. */
export function uuidOf(kind: IdKind, id: string): string {
  const uuid = uuidOfId(kind, id);
  if (uuid === null) throw new TypeError(`not a TypeID of kind ${kind}: ${JSON.stringify(id)}`);
  return uuid;
}

/** The TypeID of this kind that a stored uuid (as PostgreSQL writes one) encodes. */
export function idOfUuid(kind: IdKind, uuid: string): string {
  const hex = uuid.replaceAll('-', '');
  // The 128 bits behind two zero bits: the i-th letter holds bits 5i-2 to 5i+2.
  let out = `${idPrefixes[kind]}_`;
  for (let i = 0; i < 26; i++) {
    let v = 0;
    for (let b = 5 * i - 2; b < 5 * i + 3; b++) v = (v << 1) | (b < 0 ? 0 : (hexValue[hex.charCodeAt(b >> 2)]! >> (3 - (b & 3))) & 1);
    out += typeidAlphabet[v];
  }
  return out;
}
