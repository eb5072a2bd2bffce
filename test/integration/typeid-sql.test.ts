import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TypeID } from 'typeid-js';
import type { Knex } from 'knex';
import { createDb } from '../../src/infra/db.js';
import { createTestDatabase, type TestDatabase } from '../helpers/database.js';

describe('typeid_new() in PostgreSQL', () => {
  let database: TestDatabase;
  let db: Knex;
  beforeAll(async () => {
    database = await createTestDatabase();
    db = createDb({ url: database.url, poolMax: 1 });
  });
  afterAll(async () => {
    await db.destroy();
    await database.drop();
  });

  it('makes TypeIDs that typeid-js parses, as UUIDv7 stamped with the current time', async () => {
    const before = Date.now();
    const { rows } = await db.raw<{ rows: Array<{ id: string }> }>("SELECT typeid_new('dlv') AS id FROM generate_series(1, 200)");
    const after = Date.now();
    for (const { id } of rows) {
      const parsed = TypeID.fromString(id);
      expect(parsed.getType()).toBe('dlv');
      const uuid = parsed.toUUID();
      expect(uuid[14]).toBe('7'); // version
      expect('89ab').toContain(uuid[19]!); // RFC 4122 variant
      const ms = Number.parseInt(uuid.replaceAll('-', '').slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before - 1_000);
      expect(ms).toBeLessThanOrEqual(after + 1_000);
    }
  });

  it('is unique and sorts with ids made in Node by creation time', async () => {
    const { rows } = await db.raw<{ rows: Array<{ n: number }> }>("SELECT count(DISTINCT typeid_new('x'))::int AS n FROM generate_series(1, 20000)");
    expect(rows[0]!.n).toBe(20_000);
    const nodeEarlier = TypeID.fromString(new TypeID('dlv').toString()).toString();
    await new Promise((r) => setTimeout(r, 5));
    const { rows: sqlRows } = await db.raw<{ rows: Array<{ id: string }> }>("SELECT typeid_new('dlv') AS id");
    expect(sqlRows[0]!.id > nodeEarlier).toBe(true);
  });
});
