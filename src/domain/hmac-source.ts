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

/**
 * Rules across fields, which a shape check alone cannot express. Takes the configuration as sent,
 * even with fields of the wrong shape (those are reported by the shape check), so that one answer
 * lists every problem.
 */
export function hmacConfigProblems(config: Readonly<Record<string, unknown>>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const has = (field: keyof HmacSourceConfig) => config[field] !== undefined;
  const used = new Map<string, number>();
  const template = typeof config.signedContent === 'string' ? config.signedContent : undefined;
  for (const match of template?.matchAll(PLACEHOLDER) ?? []) {
    const name = match[1]!;
    if (!PLACEHOLDERS.has(name)) problems.push({ path: 'signedContent', message: `unknown placeholder {${name}}; use {body}, {timestamp} or {id}` });
    used.set(name, (used.get(name) ?? 0) + 1);
  }
  if (template !== undefined && used.get('body') !== 1) problems.push({ path: 'signedContent', message: 'must contain {body} exactly once' });
  if (used.has('timestamp') && !has('timestampHeader')) problems.push({ path: 'timestampHeader', message: 'is required when signedContent contains {timestamp}' });
  if (used.has('id') && !has('idHeader')) problems.push({ path: 'idHeader', message: 'is required when signedContent contains {id}' });
  if (has('toleranceSeconds') && !has('timestampHeader')) problems.push({ path: 'toleranceSeconds', message: 'applies only with a timestampHeader' });
  if (has('typeHeader') && has('typeField')) problems.push({ path: 'typeField', message: 'give typeHeader or typeField, not both' });
  const lower = (value: unknown) => (typeof value === 'string' ? value.toLowerCase() : undefined);
  if (has('timestampHeader') && lower(config.header) === lower(config.timestampHeader)) {
    problems.push({ path: 'timestampHeader', message: 'must differ from header' });
  }
  return problems;
}
