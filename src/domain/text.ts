/**
 * Text PostgreSQL can store. Pure.
 */

/** PostgreSQL text cannot hold U+0000: a value holding it is refused where it comes in. */
export const holdsNul = (value: string): boolean => value.includes('\u0000');

/** What such a value is told, after its field's path. */
export const NUL_REFUSAL = 'must not contain the NUL character (U+0000), which no text column can hold';
