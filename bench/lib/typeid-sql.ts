/**
 * TypeID ⇄ uuid in PL/pgSQL, as `pg_temp` functions for the bench's id experiments (bench/id-codec.ts
 * times them, bench/id-width.ts converts tables with them). Nothing in src/ uses them.
 */
import { typeidAlphabet } from '../../src/domain/ids.js';

/**
 * The 26 characters after the prefix carry 128 bits: the first 3, then 5 each. Each character
 * becomes its 5 bits as text (a translate, then one replace per letter), the 130 bits are cast
 * once, and their two 64-bit halves after the first two make the uuid.
 */
function decodeSql(): string {
  const placeholders = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&*';
  let bits = `translate(right(p_id, 26), '${typeidAlphabet}', '${placeholders}')`;
  for (let i = 0; i < 32; i++) bits = `replace(${bits}, '${placeholders[i]}', '${i.toString(2).padStart(5, '0')}')`;
  return `
    CREATE FUNCTION pg_temp.typeid_to_uuid(p_id text) RETURNS uuid
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
      b bit(130) := (${bits})::bit(130);
    BEGIN
      RETURN (lpad(to_hex(substring(b FROM 3 FOR 64)::int8), 16, '0') || lpad(to_hex(substring(b FROM 67 FOR 64)::int8), 16, '0'))::uuid;
    END $$`;
}

/** The uuid's two 64-bit halves, then 26 groups of bits to letters. */
function encodeSql(): string {
  const letters = `'{${typeidAlphabet.split('').join(',')}}'::text[]`;
  const ch = (expr: string) => `(${letters})[(${expr})::int + 1]`;
  const parts = [ch('(h >> 61) & 7')];
  for (let i = 2; i <= 13; i++) parts.push(ch(`(h >> ${61 - 5 * (i - 1)}) & 31`));
  parts.push(ch('((h & 1) << 4) | ((l >> 60) & 15)'));
  for (let i = 15; i <= 26; i++) parts.push(ch(`(l >> ${60 - 5 * (i - 14)}) & 31`));
  return `
    CREATE FUNCTION pg_temp.uuid_to_typeid(p_prefix text, p_id uuid) RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
    DECLARE
      hex text := replace(p_id::text, '-', '');
      h int8 := ('x' || left(hex, 16))::bit(64)::int8;
      l int8 := ('x' || right(hex, 16))::bit(64)::int8;
    BEGIN
      RETURN p_prefix || '_' || array_to_string(ARRAY[${parts.join(', ')}], '');
    END $$`;
}

/** `pg_temp.typeid_to_uuid(text)`: NULL for NULL. */
export const typeidToUuidSql = decodeSql();
/** `pg_temp.uuid_to_typeid(prefix, uuid)`. */
export const uuidToTypeidSql = encodeSql();
