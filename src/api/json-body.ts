import express, { type Request } from 'express';
import { AppError } from '../domain/errors.js';
import type { Middleware } from './route.js';

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
  const parse = express.json({ limit: limitBytes, type: () => true, strict: false });
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
