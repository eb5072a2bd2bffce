import type { Problem } from './errors.js';
import { JsonNumber, type ExactJson } from './exact-json.js';
import { holdsNul } from './text.js';

/**
 * An endpoint's content filter: a small JSON language over an event's `type` and `data`, compiled
 * on write into a PostgreSQL jsonpath predicate that fan-out evaluates against the event as stored
 * (`{id, type, timestamp, messageId, data}`). jsonb numbers are `numeric`, so a number in the
 * filter compares exactly, however many digits it has.
 *
 * `{"data.amount": {"$gte": 100}, "type": "invoice.paid"}`: every key of an object must hold (and);
 * a key is `type`, `data` or a dotted path under `data`; its value is a scalar (equality) or an
 * object of operators. `$and` / `$or` take a list of filters. A path that meets an array matches
 * when any element does. Each condition asks whether some value at the path satisfies it, so a
 * missing field, or one of another type, satisfies none; `$neq` and `$nin` are their negations and
 * so do match a missing field.
 */

export const FILTER_OPERATORS = ['$eq', '$neq', '$in', '$nin', '$gt', '$gte', '$lt', '$lte', '$exists', '$startsWith'] as const;
type Operator = (typeof FILTER_OPERATORS)[number];

const MAX_DEPTH = 8;
const MAX_LIST = 100;
const MAX_CONDITIONS = 100;

export type FilterResult = { ok: true; path: string } | { ok: false; problems: Problem[] };

/** Validates a filter and compiles it; `filter` is read with exact numbers (parseExactJson). */
export function compileEventFilter(filter: ExactJson): FilterResult {
  const problems: Problem[] = [];
  const counter = { conditions: 0 };
  const path = compileFilter(filter, 'filter', 0, problems, counter);
  if (counter.conditions > MAX_CONDITIONS) problems.push({ path: 'filter', message: `at most ${MAX_CONDITIONS} conditions` });
  return problems.length > 0 ? { ok: false, problems } : { ok: true, path };
}

const isObject = (v: ExactJson): v is { [name: string]: ExactJson } => typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof JsonNumber);
const isScalar = (v: ExactJson) => v === null || typeof v === 'boolean' || typeof v === 'string' || v instanceof JsonNumber;

function compileFilter(filter: ExactJson, at: string, depth: number, problems: Problem[], counter: { conditions: number }): string {
  if (!isObject(filter)) {
    problems.push({ path: at, message: 'must be an object of conditions' });
    return '';
  }
  if (depth > MAX_DEPTH) {
    problems.push({ path: at, message: `nested deeper than ${MAX_DEPTH} levels` });
    return '';
  }
  const keys = Object.keys(filter);
  if (keys.length === 0) problems.push({ path: at, message: 'must hold at least one condition (null removes a filter)' });
  const parts = keys.map((key) => {
    const value = filter[key]!;
    const here = `${at}.${key}`;
    if (key === '$and' || key === '$or') {
      if (!Array.isArray(value) || value.length === 0) {
        problems.push({ path: here, message: 'must be a non-empty list of filters' });
        return '';
      }
      const each = value.map((f, i) => compileFilter(f, `${here}.${i}`, depth + 1, problems, counter));
      return `(${each.join(key === '$and' ? ' && ' : ' || ')})`;
    }
    if (key.startsWith('$')) {
      problems.push({ path: here, message: 'unknown operator here: only $and and $or combine filters' });
      return '';
    }
    const target = fieldPath(key);
    if (target === undefined) {
      problems.push({ path: here, message: 'a key is type, data, or a dotted path under data such as data.amount' });
      return '';
    }
    return compileConditions(target, value, here, problems, counter);
  });
  return parts.length === 1 ? parts[0]! : `(${parts.join(' && ')})`;
}

/** `type` or `data[.name...]` as a jsonpath accessor with every name quoted; undefined for anything else. */
function fieldPath(key: string): string | undefined {
  const names = key.split('.');
  if (names[0] !== 'type' && names[0] !== 'data') return undefined;
  if (names[0] === 'type' && names.length > 1) return undefined;
  if (names.some((n) => n === '' || !validText(n))) return undefined;
  return `$${names.map((n) => `.${jsonpathString(n)}`).join('')}`;
}

function compileConditions(target: string, value: ExactJson, at: string, problems: Problem[], counter: { conditions: number }): string {
  if (!isObject(value)) {
    counter.conditions++;
    return condition(target, '$eq', value, at, problems);
  }
  const operators = Object.keys(value);
  if (operators.length === 0) problems.push({ path: at, message: 'must hold at least one operator' });
  const parts = operators.map((op) => {
    counter.conditions++;
    if (!(FILTER_OPERATORS as readonly string[]).includes(op)) {
      problems.push({ path: `${at}.${op}`, message: `unknown operator; one of ${FILTER_OPERATORS.join(' ')}` });
      return '';
    }
    return condition(target, op as Operator, value[op]!, `${at}.${op}`, problems);
  });
  return parts.length === 1 ? parts[0]! : `(${parts.join(' && ')})`;
}

/** "Some value at the path satisfies `test`": a missing value or one of another type satisfies nothing. */
const some = (target: string, test: string) => `exists(${target} ? (${test}))`;

function condition(target: string, op: Operator, value: ExactJson, at: string, problems: Problem[]): string {
  const bad = (message: string) => {
    problems.push({ path: at, message });
    return '';
  };
  switch (op) {
    case '$eq':
    case '$neq': {
      const literal = scalarLiteral(value);
      if (literal === undefined) return bad('must be a string, number, boolean or null');
      const test = some(target, `@ == ${literal}`);
      return op === '$eq' ? test : `!${test}`;
    }
    case '$in':
    case '$nin': {
      if (!Array.isArray(value) || value.length === 0 || value.length > MAX_LIST) return bad(`must be a list of 1 to ${MAX_LIST} values`);
      const literals = value.map((v) => scalarLiteral(v));
      const wrong = literals.findIndex((l) => l === undefined);
      if (wrong >= 0) return bad(`item ${wrong} must be a string, number, boolean or null`);
      const test = some(target, literals.map((l) => `@ == ${l}`).join(' || '));
      return op === '$in' ? test : `!${test}`;
    }
    case '$gt':
    case '$gte':
    case '$lt':
    case '$lte': {
      if (!(value instanceof JsonNumber) && typeof value !== 'string') return bad('must be a number or a string');
      const symbol = { $gt: '>', $gte: '>=', $lt: '<', $lte: '<=' }[op];
      return some(target, `@ ${symbol} ${scalarLiteral(value)!}`);
    }
    case '$exists':
      if (typeof value !== 'boolean') return bad('must be true or false');
      return value ? `exists(${target})` : `!exists(${target})`;
    case '$startsWith':
      if (typeof value !== 'string' || !validText(value)) return bad('must be a string');
      return some(target, `@ starts with ${jsonpathString(value)}`);
  }
}

/** A scalar as a jsonpath literal; undefined for an object, a list, or a string jsonpath cannot hold. */
function scalarLiteral(value: ExactJson): string | undefined {
  if (value === null) return 'null';
  if (typeof value === 'boolean') return String(value);
  if (value instanceof JsonNumber) return value.text;
  if (typeof value === 'string') return validText(value) ? jsonpathString(value) : undefined;
  return undefined;
}

/** PostgreSQL refuses NUL in jsonb and jsonpath, and a lone surrogate is not a character. */
const loneSurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const validText = (s: string) => !holdsNul(s) && !loneSurrogate.test(s);

/**
 * A jsonpath string literal: jsonpath reads the escapes JSON writes (\" \\ \n \uXXXX ...), so
 * JSON.stringify quotes it exactly.
 */
const jsonpathString = (s: string) => JSON.stringify(s);
