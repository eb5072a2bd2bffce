/**
 * SQL expressions that convert a column between a TypeID's text and the `uuid` its 26 letters
 * encode (docs/architecture.md, "Ids in the database"), for the migrations that change a kind of
 * id's type: expressions, not functions, because migrations hold no function text. Migration
 * 20261206000052 (endpoint ids) carries its own copy, written before this module; the kinds after
 * it use these.
 */

const alphabet = '0123456789abcdefghjkmnpqrstvwxyz';
/** One placeholder per letter, none of them a digit, so replacing them one at a time is safe. */
const placeholders = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&*';

/**
 * The uuid a TypeID expression encodes: each of its 26 letters becomes its 5 bits, and the 128 bits
 * after the first two of the 130 are cast in two 64-bit halves.
 */
export function typeidToUuid(expression: string): string {
  let bits = `translate(right(${expression}, 26), '${alphabet}', '${placeholders}')`;
  for (let i = 0; i < 32; i++) bits = `replace(${bits}, '${placeholders[i]}', '${i.toString(2).padStart(5, '0')}')`;
  const half = (from: number) => `lpad(to_hex(substring((${bits})::bit(130) FROM ${from} FOR 64)::int8), 16, '0')`;
  return `(${half(3)} || ${half(67)})::uuid`;
}

/** The TypeID with this prefix that a uuid expression encodes: 3 bits, then 25 groups of 5. */
export function uuidToTypeid(prefix: string, expression: string): string {
  const hex = (side: 'left' | 'right') => `('x' || ${side}(replace(${expression}::text, '-', ''), 16))::bit(64)::int8`;
  const h = hex('left');
  const l = hex('right');
  const letter = (expr: string) => `substr('${alphabet}', ((${expr}) + 1)::int, 1)`;
  const letters = [letter(`(${h} >> 61) & 7`)];
  for (let i = 2; i <= 13; i++) letters.push(letter(`(${h} >> ${61 - 5 * (i - 1)}) & 31`));
  letters.push(letter(`((${h} & 1) << 4) | ((${l} >> 60) & 15)`));
  for (let i = 15; i <= 26; i++) letters.push(letter(`(${l} >> ${60 - 5 * (i - 14)}) & 31`));
  return `CASE WHEN ${expression} IS NOT NULL THEN '${prefix}_' || ${letters.join(' || ')} END`;
}
