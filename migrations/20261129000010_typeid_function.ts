import type { Knex } from 'knex';

/**
 * TypeIDs generated inside PostgreSQL (UUIDv7 in Crockford base32, the same format as typeid-js),
 * so a statement that creates a variable number of rows (one delivery per matching endpoint) can
 * name them itself and intake stays a single round trip.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    CREATE FUNCTION typeid_new(prefix text) RETURNS text LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
    DECLARE
      alphabet constant text := '0123456789abcdefghjkmnpqrstvwxyz';
      ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
      raw bytea := uuid_send(gen_random_uuid());
      b130 bit(130);
      out text := '';
    BEGIN
      -- 48-bit millisecond timestamp, version 7, RFC 4122 variant; the rest stays random.
      raw := overlay(raw placing substring(int8send(ms) from 3 for 6) from 1 for 6);
      raw := set_byte(raw, 6, (get_byte(raw, 6) & 15) | 112);
      raw := set_byte(raw, 8, (get_byte(raw, 8) & 63) | 128);
      -- 26 base32 digits over 130 bits: two leading zero bits, then the 128 bits big-endian.
      b130 := B'00' || ('x' || encode(raw, 'hex'))::bit(128);
      FOR i IN 0..25 LOOP
        out := out || substr(alphabet, substring(b130 FROM i * 5 + 1 FOR 5)::int + 1, 1);
      END LOOP;
      RETURN prefix || '_' || out;
    END $$;
  `);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw('DROP FUNCTION typeid_new(text);');
}
