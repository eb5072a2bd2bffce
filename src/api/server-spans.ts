import type { TLSSocket } from 'node:tls';
import type { Request, Response, NextFunction } from 'express';
import { extractContext, SpanKind, SpanStatusCode, startSpan, type Attributes, type Span } from '../infra/tracing.js';

/** The request's SERVER span, for what the request does to start its own spans under (none: not traced). */
export function requestSpan(res: Response): Span | undefined {
  return res.locals.span as Span | undefined;
}

/**
 * One SERVER span per API request, the parent of whatever the request does (a callback's verify and
 * accept, a publish's fan-out), kept in res.locals for the handlers (requestSpan). An incoming
 * `traceparent` becomes its parent; without one the request starts a new trace, sampled by
 * OTEL_TRACES_SAMPLER. Attribute names follow the HTTP
 * semantic conventions; the query string is never recorded (it may carry anything).
 */
export function serverSpans() {
  return (req: Request, res: Response, next: NextFunction): void => {
    const query = req.url.indexOf('?');
    const attributes: Attributes = {
      'http.request.method': req.method,
      'url.path': query < 0 ? req.url : req.url.slice(0, query),
      // What req.protocol answers with `trust proxy` off (src/api/app.ts), without its getter's work.
      'url.scheme': (req.socket as TLSSocket).encrypted ? 'https' : 'http',
    };
    if (req.socket.localPort !== undefined) attributes['server.port'] = req.socket.localPort;
    const userAgent = req.headers['user-agent'];
    if (userAgent) attributes['user_agent.original'] = userAgent.slice(0, 200);
    const span = startSpan(req.method, { kind: SpanKind.SERVER, parent: extractContext(req.headers), attributes });
    if (!span) return next();
    res.locals.span = span;
    // Not sampled: the span is only a parent that carries the decision, with nothing to record or end.
    if (!span.isRecording()) return next();
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
    next();
  };
}
