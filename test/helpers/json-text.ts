import fc from 'fast-check';

/**
 * Arbitrary JSON *texts*, written the ways senders write them: whitespace anywhere JSON allows it,
 * numbers with signs, fractions and exponents of any size (so beyond double precision), and
 * strings mixing raw Unicode with every escape, lone surrogates included. fc.json() cannot stand
 * in: it only produces what JSON.stringify would write.
 */

export const whitespace = fc.stringMatching(/^[ \t\n\r]{0,3}$/);

export const numberText = fc
  .tuple(
    fc.constantFrom('', '-'),
    fc.oneof(fc.constant('0'), fc.stringMatching(/^[1-9][0-9]{0,24}$/)),
    fc.oneof(fc.constant(''), fc.stringMatching(/^\.[0-9]{1,30}$/)),
    fc.oneof(fc.constant(''), fc.stringMatching(/^[eE][+-]?[0-9]{1,4}$/)),
  )
  .map((parts) => parts.join(''));

const escape = fc.oneof(fc.constantFrom('\\"', '\\\\', '\\/', '\\b', '\\f', '\\n', '\\r', '\\t'), fc.stringMatching(/^\\u[0-9a-fA-F]{4}$/));
// Quotes, backslashes and control characters may only appear escaped.
const unescaped = fc.string({ unit: 'grapheme', maxLength: 6 }).map((s) => s.replace(/["\\\u0000-\u001f]/g, ''));

export const stringText = fc.array(fc.oneof(unescaped, escape), { maxLength: 5 }).map((parts) => `"${parts.join('')}"`);

const { value } = fc.letrec<{ value: string; array: string; object: string }>((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, numberText, stringText, fc.constantFrom('true', 'false', 'null'), tie('array'), tie('object')),
  array: fc
    .tuple(whitespace, fc.array(fc.tuple(whitespace, tie('value'), whitespace), { maxLength: 4 }))
    .map(([empty, items]) => (items.length === 0 ? `[${empty}]` : `[${items.map((item) => item.join('')).join(',')}]`)),
  object: fc
    .tuple(whitespace, fc.array(fc.tuple(whitespace, stringText, whitespace, whitespace, tie('value'), whitespace), { maxLength: 4 }))
    .map(([empty, members]) =>
      members.length === 0 ? `{${empty}}` : `{${members.map(([a, name, b, c, v, d]) => `${a}${name}${b}:${c}${v}${d}`).join(',')}}`,
    ),
}));

/** Any JSON value as text, without whitespace around it. */
export const jsonText = value;
