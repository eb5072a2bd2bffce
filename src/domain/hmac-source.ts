/**
 * The configuration of a generic `hmac` source: which header carries the signature, how it is
 * computed and where the event's id and type are. Pure, so the API validates with the same rules
 * the verifier builds from.
 */

export const HMAC_ALGORITHMS = ['sha1', 'sha256', 'sha512'] as const;
export const HMAC_ENCODINGS = ['hex', 'base64'] as const;
export type HmacAlgorithm = (typeof HMAC_ALGORITHMS)[number];
export type HmacEncoding = (typeof HMAC_ENCODINGS)[number];

export interface HmacSourceConfig {
  header: string;
  algorithm: HmacAlgorithm;
  encoding: HmacEncoding;
  /** Text before the digest in the header, e.g. `sha256=`; absent means none. */
  prefix?: string;
  timestampHeader?: string;
  toleranceSeconds?: number;
  /** What is signed: literal text with `{body}`, `{timestamp}` and `{id}` placeholders. */
  signedContent: string;
  idHeader?: string;
  typeHeader?: string;
  /** Top-level body field holding the event type when there is no typeHeader; `type` by default. */
  typeField?: string;
}

export const DEFAULT_TOLERANCE_SECONDS = 300;
export const DEFAULT_TYPE_FIELD = 'type';

export type SignedPart = { text: string } | { placeholder: 'body' | 'timestamp' | 'id' };

const PLACEHOLDER = /\{([^{}]*)\}/g;
const PLACEHOLDERS = new Set(['body', 'timestamp', 'id']);

/** Splits a template into literal text and placeholders; unknown placeholders are left to the validator. */
export function signedContentParts(template: string): SignedPart[] {
  const parts: SignedPart[] = [];
  let at = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    if (match.index > at) parts.push({ text: template.slice(at, match.index) });
    const name = match[1]!;
    parts.push(PLACEHOLDERS.has(name) ? { placeholder: name as 'body' | 'timestamp' | 'id' } : { text: match[0] });
    at = match.index + match[0].length;
  }
  if (at < template.length) parts.push({ text: template.slice(at) });
  return parts;
}

export interface ConfigProblem {
  path: string;
  message: string;
}

/** Rules across fields, which a shape check alone cannot express; every problem is listed. */
export function hmacConfigProblems(config: HmacSourceConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const used = new Map<string, number>();
  for (const match of config.signedContent.matchAll(PLACEHOLDER)) {
    const name = match[1]!;
    if (!PLACEHOLDERS.has(name)) problems.push({ path: 'signedContent', message: `unknown placeholder {${name}}; use {body}, {timestamp} or {id}` });
    used.set(name, (used.get(name) ?? 0) + 1);
  }
  if (used.get('body') !== 1) problems.push({ path: 'signedContent', message: 'must contain {body} exactly once' });
  if (used.has('timestamp') && config.timestampHeader === undefined) {
    problems.push({ path: 'timestampHeader', message: 'is required when signedContent contains {timestamp}' });
  }
  if (used.has('id') && config.idHeader === undefined) problems.push({ path: 'idHeader', message: 'is required when signedContent contains {id}' });
  if (config.toleranceSeconds !== undefined && config.timestampHeader === undefined) {
    problems.push({ path: 'toleranceSeconds', message: 'applies only with a timestampHeader' });
  }
  if (config.typeHeader !== undefined && config.typeField !== undefined) problems.push({ path: 'typeField', message: 'give typeHeader or typeField, not both' });
  if (config.header.toLowerCase() === config.timestampHeader?.toLowerCase()) {
    problems.push({ path: 'timestampHeader', message: 'must differ from header' });
  }
  return problems;
}
