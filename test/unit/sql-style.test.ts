import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import knex from 'knex';
import { describe, expect, it } from 'vitest';
import { newId, uuidOf } from '../../src/domain/ids.js';
import { statement } from '../../src/infra/sql.js';
import { TenantScope } from '../../src/store/tenant-scope.js';

/*
 * The house rules for SQL, written down at the top of src/infra/sql.ts. Style rules are read from
 * the source, so this test reads the source.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const src = join(root, 'src');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

const files = sourceFiles(src).map((path) => ({ path: relative(root, path), text: readFileSync(path, 'utf8') }));

/** The text without comments, so a comment that names a statement is not taken for one. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

/** The argument text of every call to `name(` (e.g. `.raw(`, `whereRaw(`), up to its closing parenthesis. */
function callArguments(text: string, name: RegExp): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(name)) {
    let depth = 1;
    let i = m.index + m[0].length;
    const start = i;
    let quote: string | undefined;
    for (; i < text.length && depth > 0; i++) {
      const c = text[i];
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = undefined;
      } else if (c === "'" || c === '"' || c === '`') quote = c;
      else if (c === '(') depth++;
      else if (c === ')') depth--;
    }
    found.push(text.slice(start, i - 1));
  }
  return found;
}

/** The string literals in a piece of code; a template literal without its `${...}` parts, which are code. */
function strings(text: string): string[] {
  return [...text.matchAll(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|`(?:[^`\\]|\\.)*`/g)].map((m) => m[0].replace(/\$\{[^}]*\}/g, ''));
}

const rawCall = /(?:\.raw|Raw)(?:<[^>(]*>)?\(/g;

describe('SQL style', () => {
  it('binds raw SQL by name, never by position (`?`, `??`)', () => {
    const positional = files.flatMap(({ path, text }) =>
      callArguments(code(text), rawCall)
        .flatMap(strings)
        .filter((sql) => sql.includes('?'))
        .map((sql) => `${path}: ${sql.slice(0, 80)}`),
    );
    expect(positional).toEqual([]);
  });

  it('keeps SQL in src/store/ and src/delivery/', () => {
    // infra/ is the plumbing that runs SQL: creating the database, migrations, the statement runner.
    const allowed = (path: string) =>
      path.startsWith('src/store/') ||
      path.startsWith('src/delivery/') ||
      path.startsWith('src/infra/') ||
      // Being replaced by the endpoint-health module (issue 22); drop this line when it goes.
      path === 'src/ops/auto-disable.ts';
    const sqlText = /\b(SELECT|INSERT INTO|UPDATE \w+ SET|DELETE FROM|WITH RECURSIVE|ALTER TABLE)\b/;
    const builder = /\.(raw|whereRaw|where|whereIn|whereNull|whereExists|insert|returning|forUpdate|first|pluck|leftJoin|groupBy|orderBy)\(|\b(scope|s|trx|db|platformDb)\.(from|insert|expression|composed|run)\(|\b(db|trx|platformDb)\('/;
    const outside = files
      .filter(({ path }) => !allowed(path))
      .flatMap(({ path, text }) => {
        const body = code(text);
        const hits = strings(body).filter((s) => sqlText.test(s));
        const calls = body.split('\n').filter((line) => builder.test(line));
        return [...hits, ...calls].map((hit) => `${path}: ${hit.trim().slice(0, 80)}`);
      });
    expect(outside).toEqual([]);
  });

  it('uses the raw pg client only where knex cannot, saying why', () => {
    const users = files.filter(({ text }) => /acquireConnection\(\)|new pg\.Client\(/.test(text)).map(({ path }) => path);
    expect(users.sort()).toEqual(['src/infra/db.ts', 'src/infra/sql.ts', 'src/store/retention-store.ts']);
    const lock = files.find(({ path }) => path === 'src/store/retention-store.ts')!.text;
    expect(lock).toMatch(/Raw pg client: a session lock/);
  });
});

describe('TenantScope is sealed', () => {
  // A pg client with no connection: nothing here reaches a database, each refusal comes first.
  const unconnected = knex({ client: 'pg' });
  const tenantId = newId('tenant');
  // Rows hold the tenant as the uuid its TypeID encodes, so that is what the scope binds.
  const tenantKey = uuidOf('tenant', tenantId);
  const scope = new TenantScope(unconnected, tenantId, { type: 'system', id: null });

  it('exposes no connection, by any name', () => {
    expect('db' in scope).toBe(false);
    expect(Object.keys(scope).sort()).toEqual(['actor', 'session', 'tenantId']);
    const methods = Object.getOwnPropertyNames(TenantScope.prototype).filter((m) => m !== 'constructor');
    expect(methods.filter((m) => /db|knex|connection/i.test(m) && m !== 'transactionWithPlatformDb')).toEqual([]);
  });

  it('filters every query it builds by its tenant', () => {
    const { sql, bindings } = scope.from('api_keys').where('api_keys.id', 'key_1').toSQL();
    expect(sql).toBe('select * from "api_keys" where "api_keys"."tenant_id" = ? and "api_keys"."id" = ?');
    expect(bindings).toEqual([tenantKey, 'key_1']);
    expect(scope.insert('delivery_queue', { delivery_id: 'dlv_1' }).toSQL().bindings).toContain(tenantKey);
  });

  it('refuses composed SQL that names a tenant table, or a tenant of its own', async () => {
    await expect(scope.composed('SELECT id FROM endpoints WHERE id = :id', { id: 'x' })).rejects.toThrow(/names the table endpoints/);
    expect(() => scope.expression('(SELECT count(*) FROM deliveries)')).toThrow(/names the table deliveries/);
    await expect(scope.composed('SELECT :tenantId', { tenantId: newId('tenant') })).rejects.toThrow(/tenantId/);
  });

  it('refuses a prepared statement without :tenantId', () => {
    expect(() => scope.run(statement('no_tenant', 'SELECT * FROM endpoints WHERE id = :id'), { id: 'x' })).toThrow(/takes :tenantId/);
  });

  it('hands out the unscoped transaction only where the name is written', () => {
    const users = files.filter(({ text }) => text.includes('transactionWithPlatformDb(')).map(({ path }) => path);
    // The delivery lifecycle's statements take the transaction; these two go when the lifecycle takes a scope.
    expect(users.sort()).toEqual(['src/store/backfill-store.ts', 'src/store/endpoints-store.ts', 'src/store/replays-store.ts']);
    const constructed = files.filter(({ text }) => /new TenantScope\(/.test(text)).map(({ path }) => path);
    expect(constructed.sort()).toEqual(['src/api/auth.ts', 'src/ops/platform-events.ts', 'src/store/tenant-scope.ts']);
  });
});
