import type { ErrorRequestHandler } from 'express';
import type { Logger } from 'pino';
import { AppError, type Problem } from '../domain/errors.js';
import { isStorageUnavailable } from '../infra/db.js';
import { traceIds } from '../infra/tracing.js';
import { requestSpan } from './server-spans.js';

const bodyParserErrors: Record<string, [number, string, string]> = {
  'entity.too.large': [413, 'payload_too_large', 'request body is larger than the limit'],
  'entity.parse.failed': [400, 'malformed_json', 'request body is not valid JSON'],
  'encoding.unsupported': [415, 'unsupported_encoding', 'request body encoding is not supported'],
  'request.aborted': [400, 'request_aborted', 'request was aborted by the client'],
  'charset.unsupported': [415, 'unsupported_charset', 'request body charset is not supported'],
};

/**
 * Other client errors that Express and the body parser raise as http-errors with a 4xx status and
 * no known `type`: a corrupt gzip/deflate/br body, a path with a broken %-escape. They must keep
 * their 4xx; falling through to the storage check would report them as an outage (503).
 */
const clientErrorCodes: Record<number, [string, string]> = {
  400: ['bad_request', 'request could not be read'],
  413: ['payload_too_large', 'request body is larger than the limit'],
  415: ['unsupported_media_type', 'request body encoding is not supported'],
};

function clientErrorStatus(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | null)?.status;
  return typeof status === 'number' && Number.isInteger(status) && status >= 400 && status < 500 ? status : undefined;
}

/** Maps every failure to the contract's error shape. Only 5xx are logged as errors. */
export function errorHandler(logger: Logger): ErrorRequestHandler {
  return (err, req, res, _next) => {
    let status = 500;
    let code = 'internal_error';
    let message = 'internal error';
    let headers: Record<string, string> = {};
    let details: readonly Problem[] | undefined;
    const parserType = (err as { type?: string }).type;
    if (err instanceof AppError) {
      ({ status, code, message, headers } = err);
      details = (err as { details?: readonly Problem[] }).details;
    } else if (parserType && bodyParserErrors[parserType]) {
      [status, code, message] = bodyParserErrors[parserType]!;
    } else if (clientErrorStatus(err) !== undefined) {
      status = clientErrorStatus(err)!;
      [code, message] = clientErrorCodes[status] ?? clientErrorCodes[400]!;
    } else if (isStorageUnavailable(err)) {
      status = 503;
      code = 'unavailable';
      message = 'storage is unavailable; retry later';
      headers = { 'retry-after': '5' };
    }
    if (status >= 500) logger.error({ err, method: req.method, path: req.path, ...traceIds(requestSpan(res)) }, 'request failed');
    if (res.headersSent) return;
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    res.status(status).json({ error: { code, message, ...(details ? { details } : {}) } });
  };
}
