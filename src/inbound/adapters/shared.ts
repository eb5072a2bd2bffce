import { documentSpan, memberSpan } from '../../domain/json-span.js';
import { RawJson } from '../../domain/raw-json.js';
import { holdsNul, NUL_REFUSAL } from '../../domain/text.js';
import type { InboundRequest, ParseResult, VerifyResult } from '../adapter.js';
import type { ParsedEvent } from '../../domain/events.js';
import { digestHex } from '../../domain/dedupe.js';

/**
 * Helpers every adapter uses, so each provider file reads as its contract and nothing else.
 * The guards turn any unexpected exception into a rejection: an adapter must never throw,
 * whatever a hostile caller sends.
 */

/** Timestamped contracts reject signatures more than five minutes from now, in either direction (an `hmac` source may choose). */
export const TIMESTAMP_TOLERANCE_SECONDS = 300;

/** Ids, event types and statuses end up in keys and indexed columns; real ones are far shorter. */
export const MAX_FIELD_LENGTH = 255;

type ParseCode = Extract<ParseResult, { ok: false }>['code'];
type VerifyFailed = Extract<VerifyResult, { ok: false }>;
export type JsonObject = Record<string, unknown>;

/** Thrown by the field readers below and turned into a ParseResult by safeParse, never beyond it. */
class ParseFailure extends Error {
  constructor(
    readonly code: ParseCode,
    message: string,
  ) {
    super(message);
  }
}

export function safeParse(parse: () => ParsedEvent): ParseResult {
  try {
    return { ok: true, event: parse() };
  } catch (error) {
    if (error instanceof ParseFailure) return { ok: false, code: error.code, message: error.message };
    return { ok: false, code: 'invalid_field', message: 'body could not be interpreted' };
  }
}

export function safeVerify(verify: () => VerifyResult): VerifyResult {
  try {
    return verify();
  } catch {
    return rejected('bad_signature', 'signature could not be checked');
  }
}

export function rejected(reason: VerifyFailed['reason'], message: string): VerifyFailed {
  return { ok: false, reason, message };
}

/** A header as a string, or undefined when absent or blank. */
export function header(request: InboundRequest, name: string): string | undefined {
  const value: unknown = request.headers[name];
  if (typeof value !== 'string') return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Provider payloads are shallow. A body nested deeper than this still parses (JSON.parse does not
 * recurse), but whatever walks it recursively (the fallback dedupe key) would overflow the stack:
 * a 500 for bad input.
 */
export const MAX_JSON_DEPTH = 256;

/** Iterative, so the check itself cannot overflow the stack it protects. */
function nestedDeeperThan(value: unknown, limit: number): boolean {
  const pending: Array<[unknown, number]> = [[value, 1]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, depth] = next;
    if (typeof item !== 'object' || item === null) continue;
    if (depth > limit) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) pending.push([child, depth + 1]);
  }
  return false;
}

/**
 * A verified body both ways: `value` to read the fields the platform needs (ids, types, statuses),
 * `text` to take the forwarded payload from, as the provider wrote it.
 */
export interface JsonBody {
  text: string;
  value: JsonObject;
}

/** The body as a JSON object. Invalid UTF-8 is malformed too: replacing bytes would alter what is forwarded. */
export function parseJsonObject(rawBody: Buffer): JsonBody {
  let text: string;
  let value: unknown;
  try {
    text = utf8.decode(rawBody);
    value = JSON.parse(text);
  } catch {
    throw new ParseFailure('malformed_json', 'body is not valid UTF-8 JSON');
  }
  if (!isObject(value)) throw new ParseFailure('invalid_field', 'body must be a JSON object');
  if (nestedDeeperThan(value, MAX_JSON_DEPTH)) throw new ParseFailure('invalid_field', `body is nested deeper than ${MAX_JSON_DEPTH} levels`);
  return { text, value };
}

/** A top-level member exactly as written (digits, escapes, key order, spaces), or undefined when absent. */
export function rawMember(body: JsonBody, field: string): RawJson | undefined {
  const span = memberSpan(body.text, field);
  return span && new RawJson(body.text.slice(span.start, span.end));
}

/** The whole body exactly as written, less the whitespace around it. */
export function rawDocument(body: JsonBody): RawJson {
  const span = documentSpan(body.text);
  return new RawJson(body.text.slice(span.start, span.end));
}

/** A required non-empty string; absent or null is missing, anything else of the wrong shape invalid. */
export function requireString(object: JsonObject, field: string, path = field): string {
  const value = optionalString(object, field, path);
  if (value === undefined) throw new ParseFailure('missing_field', `${path} is required`);
  return value;
}

export function optionalString(object: JsonObject, field: string, path = field): string | undefined {
  const value = Object.hasOwn(object, field) ? object[field] : undefined;
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') throw new ParseFailure('invalid_field', `${path} must be a non-empty string`);
  if (value.length > MAX_FIELD_LENGTH) throw new ParseFailure('invalid_field', `${path} is longer than ${MAX_FIELD_LENGTH} characters`);
  // PostgreSQL text cannot hold U+0000: stored as an id or type it would fail the insert (a 500,
  // retried forever by the provider) instead of being refused as the bad input it is.
  if (holdsNul(value)) throw new ParseFailure('invalid_field', `${path} ${NUL_REFUSAL}`);
  return value;
}

/**
 * An optional correlation id: a value that is not a string is ignored (senders use such fields
 * loosely), but a string must still be a usable id.
 */
export function correlationId(object: JsonObject, field: string, path = field): string | undefined {
  const value = Object.hasOwn(object, field) ? object[field] : undefined;
  return typeof value === 'string' ? optionalString(object, field, path) : undefined;
}

export function requireObject(object: JsonObject, field: string, path = field): JsonObject {
  const value = Object.hasOwn(object, field) ? object[field] : undefined;
  if (value === undefined || value === null) throw new ParseFailure('missing_field', `${path} is required`);
  if (!isObject(value)) throw new ParseFailure('invalid_field', `${path} must be an object`);
  return value;
}

export function parseFailure(code: ParseCode, message: string): never {
  throw new ParseFailure(code, message);
}

/**
 * Unix seconds from a signature header, checked against `now`. Non-digits are a malformed
 * signature; digits too long to be a real time, zero, or outside the tolerance are out of range.
 */
export function checkTimestamp(raw: string, now: Date, toleranceSeconds = TIMESTAMP_TOLERANCE_SECONDS): { ok: true; seconds: number } | VerifyFailed {
  if (!/^\d+$/.test(raw)) return rejected('bad_signature', 'signature timestamp is not an integer of unix seconds');
  const seconds = Number(raw);
  const nowSeconds = Math.floor(now.getTime() / 1000);
  // 15 digits keeps Number exact; NaN `now` must not slip through the comparison as "in range".
  const inRange =
    raw.length <= 15 &&
    seconds > 0 &&
    Number.isFinite(nowSeconds) &&
    Math.abs(nowSeconds - seconds) <= toleranceSeconds;
  if (!inRange) return rejected('timestamp_out_of_range', `signature timestamp is more than ${toleranceSeconds} s from now`);
  return { ok: true, seconds };
}

/** Joins key parts unambiguously: ':' inside an id is escaped, so 'a:b'+'c' never equals 'a'+'b:c'. */
export function keyOf(...parts: string[]): string {
  return parts.map((part) => part.replaceAll('%', '%25').replaceAll(':', '%3A')).join(':');
}

export interface KeyedSignatureHeader {
  timestamp: string;
  signatures: string[];
}

/**
 * Splits `t=..,v1=..[,v1=..]` (Momo automation, Stripe), tolerating spaces; other keys are ignored
 * for forward compatibility. Undefined when there is no signature, or no single timestamp: two
 * different ones would make it ambiguous which was signed.
 */
export function parseKeyedSignatureHeader(value: string, timestampKey = 't', signatureKey = 'v1'): KeyedSignatureHeader | undefined {
  const timestamps: string[] = [];
  const signatures: string[] = [];
  for (const part of value.split(',')) {
    const separator = part.indexOf('=');
    if (separator < 0) continue;
    const key = part.slice(0, separator).trim();
    const item = part.slice(separator + 1).trim();
    if (key === timestampKey) timestamps.push(item);
    else if (key === signatureKey) signatures.push(item);
  }
  const [timestamp] = timestamps;
  if (timestamp === undefined || timestamps.length > 1 || signatures.length === 0) return undefined;
  return { timestamp, signatures };
}

/** An id or type carried in a header, with the same limits as one read from the body. */
export function requireHeaderField(request: InboundRequest, name: string): string {
  const value = header(request, name);
  if (value === undefined) parseFailure('missing_field', `${name} header is required`);
  if (value.length > MAX_FIELD_LENGTH) parseFailure('invalid_field', `${name} is longer than ${MAX_FIELD_LENGTH} characters`);
  return value;
}

/**
 * For contracts whose event id is a header, not in the body: two events may carry identical bytes
 * (`{"type":"ping"}`), so a repeat is the same id AND the same body. The id is length-prefixed so
 * no (id, body) pair can be spelled as another.
 */
export function repeatDigestWithHeader(request: InboundRequest, name: string): string {
  const id = header(request, name) ?? '';
  return digestHex(Buffer.concat([Buffer.from(`${Buffer.byteLength(id)}:${id}.`, 'utf8'), request.rawBody]));
}
