import type { Request, Response, NextFunction } from 'express';
import { extractContext, SpanKind, SpanStatusCode, startSpan, type Span } from '../infra/tracing.js';

/** The request's SERVER span, for what the request does to start its own spans under (none: not traced). */
export function requestSpan(res: Response): Span | undefined {
  return res.locals.span as Span | undefined;
}

/**
 * One SERVER span per API request, the parent of whatever the request does (a callback's verify and
 * accept, a publish's fan-out), kept in res.locals for the handlers (requestSpan). An incoming `traceparent` becomes its parent; without one the
 * request starts a new trace, sampled by OTEL_TRACES_SAMPLER. Attribute names follow the HTTP
 * semantic conventions; the query string is never recorded (it may carry anything).
 */
export function serverSpans() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const span = startSpan(req.method, {
      kind: SpanKind.SERVER,
      parent: extractContext(req.headers),
      attributes: {
        'http.request.method': req.method,
        'url.path': req.path,
        'url.scheme': req.protocol,
        ...(req.socket.localPort !== undefined && { 'server.port': req.socket.localPort }),
        ...(req.headers['user-agent'] && { 'user_agent.original': req.headers['user-agent'].slice(0, 200) }),
      },
    });
    if (!span) return next();
    res.on('finish', () => {
      const route = (req.route as { path?: unknown } | undefined)?.path;
      if (typeof route === 'string') {
        span.updateName(`${req.method} ${route}`);
        span.setAttribute('http.route', route);
      }
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    });
    res.locals.span = span;
    next();
  };
}
