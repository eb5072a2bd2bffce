import express, { type Request } from 'express';
import { AppError } from '../domain/errors.js';
import { memberSpan } from '../domain/json-span.js';
import { RawJson } from '../domain/raw-json.js';
import type { Middleware } from './route.js';

/** Each JSON body's bytes, as read, for the routes that forward part of it (see rawJsonMember). */
const receivedBodies = new WeakMap<object, { bytes: Buffer; charset: string }>();
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** A body is present when it is chunked or announces at least one byte. */
function hasBody(req: Request): boolean {
  return req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
}

/** application/json, or a structured syntax suffix such as application/merge-patch+json. */
function isJsonMediaType(contentType: string): boolean {
  const mediaType = contentType.split(';')[0]!.trim().toLowerCase();
  return mediaType === 'application/json' || /^application\/[a-z0-9.!#$&^_-]+\+json$/.test(mediaType);
}

/**
 * The body of the management API's routes: JSON and nothing else. A body with another content type
 * (text/plain, a form, or none at all) is refused with 415 before a byte of it is read, instead of
 * being parsed as JSON anyway; a missing body is left to the route's validation, which says what
 * it needs. Any JSON value parses (`null` included), so the route can say "body must be a JSON
 * object" rather than "not valid JSON" for a body that is valid JSON of the wrong kind.
 */
export function jsonBody(limitBytes: number): Middleware {
  const parse = express.json({
    limit: limitBytes,
    type: () => true,
    strict: false,
    // Only a reference is kept; the bytes are decoded again only by a route that asks for them.
    verify: (req, _res, bytes, charset) => {
      receivedBodies.set(req, { bytes, charset });
    },
  });
  return (req, res, next) => {
    if (!hasBody(req)) return next();
    const contentType = req.headers['content-type'];
    if (contentType === undefined || !isJsonMediaType(contentType)) {
      const got = contentType === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(contentType.slice(0, 100))}`;
      return next(new AppError(415, 'unsupported_media_type', `request body must be JSON sent as Content-Type: application/json (got ${got})`));
    }
    parse(req, res, next);
  };
}

/**
 * A top-level member of the JSON body exactly as the client wrote it, for a route that forwards it
 * (an event's `data`): req.body has been through JSON.parse, which drops digits beyond double
 * precision, turns 1e400 into Infinity, and whose objects reorder integer-like keys. The route's
 * schema must require the member; the body has been validated before this is called.
 *
 * The text is decoded strictly: a body that is not valid UTF-8 was parsed with replacement
 * characters, and forwarding those would alter the payload, so it is refused instead.
 */
export function rawJsonMember(req: Request, name: string): RawJson {
  const body = receivedBodies.get(req);
  if (body === undefined) throw new Error(`no JSON body was read for ${req.method} ${req.path}`);
  if (body.charset !== 'utf-8') throw new AppError(415, 'unsupported_charset', 'a body forwarded as written must be UTF-8');
  let text: string;
  try {
    text = strictUtf8.decode(body.bytes);
  } catch {
    throw new AppError(400, 'malformed_json', 'request body is not valid UTF-8');
  }
  const span = memberSpan(text, name);
  if (span === undefined) throw new Error(`validated JSON body has no member ${JSON.stringify(name)}`);
  return new RawJson(text.slice(span.start, span.end));
}
