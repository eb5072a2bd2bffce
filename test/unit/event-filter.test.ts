import { describe, expect, it } from 'vitest';
import { compileEventFilter } from '../../src/domain/event-filter.js';
import { JsonNumber, parseExactJson } from '../../src/domain/exact-json.js';

const compile = (text: string) => compileEventFilter(parseExactJson(text));
const pathOf = (text: string) => {
  const result = compile(text);
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.path;
};

describe('parseExactJson', () => {
  it('keeps every number as written, and everything else as JSON.parse reads it', () => {
    const value = parseExactJson('{ "a": 12345678901234567891, "b": [-0.10, 1E+400, true, null, "q\\"\\u00e9"], "__proto__": {} }') as Record<string, unknown>;
    expect(value.a).toEqual(new JsonNumber('12345678901234567891'));
    expect(value.b).toEqual([new JsonNumber('-0.10'), new JsonNumber('1E+400'), true, null, 'q"é']);
    expect(Object.keys(value)).toEqual(['a', 'b', '__proto__']);
  });
});

describe('compileEventFilter', () => {
  const compiled: Array<[string, string, string]> = [
    ['an implicit $eq on type', '{"type": "invoice.paid"}', 'exists($."type" ? (@ == "invoice.paid"))'],
    ['$eq on a nested path', '{"data.customer.id": {"$eq": "c_1"}}', 'exists($."data"."customer"."id" ? (@ == "c_1"))'],
    ['$neq', '{"data.status": {"$neq": "void"}}', '!exists($."data"."status" ? (@ == "void"))'],
    ['a big integer, digit for digit', '{"data.amount": {"$gt": 12345678901234567890}}', 'exists($."data"."amount" ? (@ > 12345678901234567890))'],
    ['$gte $lt together (and)', '{"data.n": {"$gte": -1.5, "$lt": 1e3}}', '(exists($."data"."n" ? (@ >= -1.5)) && exists($."data"."n" ? (@ < 1e3)))'],
    ['$lte on a string', '{"data.day": {"$lte": "2026-12-01"}}', 'exists($."data"."day" ? (@ <= "2026-12-01"))'],
    ['$in', '{"data.country": {"$in": ["VN", "TH", 3, null, true]}}', 'exists($."data"."country" ? (@ == "VN" || @ == "TH" || @ == 3 || @ == null || @ == true))'],
    ['$nin', '{"data.country": {"$nin": ["VN"]}}', '!exists($."data"."country" ? (@ == "VN"))'],
    ['$exists true and false', '{"data.a": {"$exists": true}, "data.b": {"$exists": false}}', '(exists($."data"."a") && !exists($."data"."b"))'],
    ['$startsWith', '{"type": {"$startsWith": "invoice."}}', 'exists($."type" ? (@ starts with "invoice."))'],
    ['quotes, backslashes and unicode in values and keys', '{"data.we\\"ird\\\\key": "a\\"b\\\\c\\né😀"}', 'exists($."data"."we\\"ird\\\\key" ? (@ == "a\\"b\\\\c\\né😀"))'],
    ['keys with jsonpath syntax in them', '{"data.$x.a b.@": 1}', 'exists($."data"."$x"."a b"."@" ? (@ == 1))'],
    ['the whole of data', '{"data": {"$exists": true}}', 'exists($."data")'],
    ['$and and $or', '{"$or": [{"type": "a"}, {"$and": [{"data.x": 1}, {"data.y": 2}]}]}',
      '(exists($."type" ? (@ == "a")) || (exists($."data"."x" ? (@ == 1)) && exists($."data"."y" ? (@ == 2))))'],
  ];
  it.each(compiled)('compiles %s', (_, text, path) => {
    expect(pathOf(text)).toBe(path);
  });

  const refused: Array<[string, string, Array<[string, RegExp]>]> = [
    ['an unknown operator, with its path', '{"data.amount": {"$gtx": 5}}', [['filter.data.amount.$gtx', /unknown operator/]]],
    ['every problem at once', '{"data.a": {"$in": 5}, "data.b": {"$gt": true}, "meta.x": 1, "$not": {}}',
      [['filter.data.a.$in', /list/], ['filter.data.b.$gt', /number or a string/], ['filter.meta.x', /a key is type, data/], ['filter.$not', /only \$and and \$or/]]],
    ['a path under type', '{"type.x": "a"}', [['filter.type.x', /a key is/]]],
    ['an empty path segment', '{"data..a": 1, "data.": 2}', [['filter.data..a', /a key is/], ['filter.data.', /a key is/]]],
    ['an object or list to compare with', '{"data.a": {"$eq": {"x": 1}}, "data.b": [1]}', [['filter.data.a.$eq', /string, number/], ['filter.data.b', /string, number/]]],
    ['a bad item of $in', '{"data.a": {"$nin": ["x", [1]]}}', [['filter.data.a.$nin', /item 1/]]],
    ['an empty $in', '{"data.a": {"$in": []}}', [['filter.data.a.$in', /list of 1 to/]]],
    ['$exists that is not a boolean', '{"data.a": {"$exists": 1}}', [['filter.data.a.$exists', /true or false/]]],
    ['$startsWith that is not a string', '{"data.a": {"$startsWith": 1}}', [['filter.data.a.$startsWith', /string/]]],
    ['$and that is not a list of filters', '{"$and": {}, "$or": [1]}', [['filter.$and', /non-empty list/], ['filter.$or.0', /object of conditions/]]],
    ['an empty filter', '{}', [['filter', /at least one condition/]]],
    ['an empty operator object', '{"data.a": {}}', [['filter.data.a', /at least one operator/]]],
    ['NUL in a string', '{"data.a": "x\\u0000"}', [['filter.data.a', /string, number/]]],
    ['a lone surrogate', '{"data.a": {"$startsWith": "\\ud800"}}', [['filter.data.a.$startsWith', /string/]]],
    ['nesting past the limit', '{"$and":[{"$and":[{"$and":[{"$and":[{"$and":[{"$and":[{"$and":[{"$and":[{"$and":[{"type":"a"}]}]}]}]}]}]}]}]}]}',
      [['filter.$and.0.$and.0.$and.0.$and.0.$and.0.$and.0.$and.0.$and.0.$and.0', /deeper than 8/]]],
  ];
  it.each(refused)('refuses %s', (_, text, expected) => {
    const result = compile(text);
    expect(result.ok).toBe(false);
    const problems = result.ok ? [] : result.problems;
    expect(problems.map((p) => p.path)).toEqual(expected.map(([path]) => path));
    problems.forEach((p, i) => expect(p.message).toMatch(expected[i]![1]));
  });

  it('refuses more than 100 conditions', () => {
    const text = JSON.stringify({ $and: Array.from({ length: 101 }, (_, i) => ({ [`data.f${i}`]: i })) });
    const result = compile(text);
    expect(result.ok ? [] : result.problems).toEqual([{ path: 'filter', message: 'at most 100 conditions' }]);
  });
});
