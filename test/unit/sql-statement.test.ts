import { describe, expect, it } from 'vitest';
import { statement } from '../../src/infra/sql.js';

describe('statement', () => {
  it('numbers named parameters in order of first use, reuses a repeated one, and leaves casts alone', () => {
    const st = statement('s', `SELECT :a::text, :b, COALESCE(:a::text, x), now()::date, ':' || y WHERE z = :c_2`);
    expect(st.text).toBe(`SELECT $1::text, $2, COALESCE($1::text, x), now()::date, ':' || y WHERE z = $3`);
    expect(st.params).toEqual(['a', 'b', 'c_2']);
    expect(st.name).toBe('s');
  });
});
