import type { Problem } from './errors.js';

/**
 * An endpoint's own request headers (`headers: {name: value}`): which are allowed, and how they are
 * shown. The platform's own headers are refused rather than silently overridden, so a tenant learns
 * on write that `Content-Type` or `webhook-signature` is not theirs to set.
 */

export const MAX_ENDPOINT_HEADERS = 20;
export const MAX_HEADER_VALUE_BYTES = 1024;

/** What GET shows instead of a value: nothing of the value itself, not even its length. */
export const MASKED_HEADER_VALUE = '••••';

/** Set by the platform on every attempt, or by the HTTP client for the connection (hop-by-hop). */
const PLATFORM_HEADERS = new Set([
  'content-type',
  'content-length',
  'host',
  'traceparent',
  'tracestate',
  'user-agent',
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

/** Whether the platform sets this header itself (any case); such a name is never the endpoint's. */
export function isPlatformHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower.startsWith('webhook-') || PLATFORM_HEADERS.has(lower);
}

/** RFC 9110 token characters. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/**
 * Tab and visible Latin-1: a header value goes on the wire as Latin-1 bytes, so a character beyond
 * U+00FF cannot be sent, and control characters (CR, LF and NUL above all) would split the request.
 */
const VALUE = /^[\t\x20-\x7e\xa0-\xff]*$/;

/** Every problem with a `headers` object, each with its path (`headers.<name>`); empty when it is valid. */
export function endpointHeaderProblems(headers: Record<string, unknown>): Problem[] {
  const problems: Problem[] = [];
  const names = Object.keys(headers);
  if (names.length > MAX_ENDPOINT_HEADERS) problems.push({ path: 'headers', message: `at most ${MAX_ENDPOINT_HEADERS} headers` });
  const seen = new Map<string, string>();
  for (const name of names) {
    const path = `headers.${name}`;
    const value = headers[name];
    if (!TOKEN.test(name)) problems.push({ path, message: 'a header name is letters, digits and !#$%&\'*+-.^_`|~ only' });
    else if (isPlatformHeader(name)) problems.push({ path, message: `${name} is set by the platform and cannot be overridden` });
    const lower = name.toLowerCase();
    const earlier = seen.get(lower);
    if (earlier !== undefined) problems.push({ path, message: `the same header as ${earlier} (names are case-insensitive)` });
    seen.set(lower, name);
    if (typeof value !== 'string') problems.push({ path, message: 'must be a string' });
    else if (Buffer.byteLength(value, 'utf8') > MAX_HEADER_VALUE_BYTES) problems.push({ path, message: `at most ${MAX_HEADER_VALUE_BYTES} bytes` });
    else if (!VALUE.test(value)) problems.push({ path, message: 'no control characters (CR, LF, NUL) and nothing beyond Latin-1' });
  }
  return problems;
}

/** The headers as GET shows them: every name, no value. */
export function maskEndpointHeaders(headers: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(headers).map((name) => [name, MASKED_HEADER_VALUE]));
}
