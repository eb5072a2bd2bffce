import { Router, type Request, type Response } from 'express';
import type { OpenAPIRegistry, RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z, type ZodType } from 'zod';
import { AppError } from '../domain/errors.js';
import type { TenantScope } from '../store/tenant-scope.js';
import { errorSchema } from './schemas.js';

export type AuthKind = 'admin' | 'tenant' | 'signature' | 'none';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface RouteSpec<B extends ZodType, Q extends ZodType, P extends ZodType> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Express syntax (`/v1/endpoints/:id`); the OpenAPI path is derived from it. */
  path: string;
  summary: string;
  tag: string;
  auth: AuthKind;
  body?: B;
  query?: Q;
  params?: P;
  success: { status: number; description: string; schema?: ZodType };
  errors?: number[];
  /** The inbound route documents its body as opaque bytes: the signature covers them exactly. */
  rawBody?: boolean;
}

export interface RouteContext<B, Q, P> {
  req: Request;
  res: Response;
  body: B;
  query: Q;
  params: P;
  scope: TenantScope;
}

export type Middleware = (req: Request, res: Response, next: (err?: unknown) => void) => void;

const errorDescriptions: Record<number, string> = {
  400: 'Invalid request',
  401: 'Missing or invalid credentials',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Conflicts with the current state',
  413: 'Body too large',
  503: 'Storage unavailable; retry after the Retry-After delay',
};

function validate<T>(schema: ZodType<T> | undefined, value: unknown, where: string): T {
  if (!schema) return value as T;
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = issue.path.length > 0 ? issue.path.join('.') : where;
  throw new AppError(400, 'validation_failed', `${path}: ${issue.message}`);
}

/**
 * Every route is declared through here, so the schema that validates a request is the schema that
 * documents it: /openapi.json cannot drift from what the server accepts.
 */
export class ApiRoutes {
  readonly router = Router();

  constructor(
    private readonly registry: OpenAPIRegistry,
    private readonly auth: Record<AuthKind, Middleware[]>,
  ) {}

  add<B extends ZodType = ZodType<undefined>, Q extends ZodType = ZodType<undefined>, P extends ZodType = ZodType<undefined>>(
    spec: RouteSpec<B, Q, P>,
    handler: (ctx: RouteContext<z.output<B>, z.output<Q>, z.output<P>>) => Promise<Reply>,
  ): void {
    this.document(spec);
    this.router[spec.method](spec.path, ...this.auth[spec.auth], async (req: Request, res: Response) => {
      const reply = await handler({
        req,
        res,
        body: validate(spec.body, req.body, 'body') as z.output<B>,
        query: validate(spec.query, req.query, 'query') as z.output<Q>,
        params: validate(spec.params, req.params, 'params') as z.output<P>,
        scope: res.locals.scope as TenantScope,
      });
      if (res.headersSent) return; // the handler streamed its own answer (e.g. /metrics)
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
      if (reply.body === undefined) res.status(reply.status).end();
      else res.status(reply.status).json(reply.body);
    });
  }

  private document(spec: RouteSpec<ZodType, ZodType, ZodType>): void {
    const security =
      spec.auth === 'admin' ? [{ adminToken: [] }] : spec.auth === 'tenant' ? [{ apiKey: [] }] : [];
    const responses: RouteConfig['responses'] = {
      [spec.success.status]: {
        description: spec.success.description,
        ...(spec.success.schema ? { content: { 'application/json': { schema: spec.success.schema } } } : {}),
      },
    };
    const errors = new Set([...(spec.errors ?? []), ...(spec.body || spec.query ? [400] : []), ...(spec.auth === 'tenant' || spec.auth === 'admin' ? [401] : [])]);
    for (const status of errors) {
      responses[status] = { description: errorDescriptions[status] ?? 'Error', content: { 'application/json': { schema: errorSchema } } };
    }
    this.registry.registerPath({
      method: spec.method,
      path: spec.path.replace(/:([A-Za-z]+)/g, '{$1}'),
      summary: spec.summary,
      tags: [spec.tag],
      security,
      request: {
        ...(spec.params ? { params: spec.params as never } : {}),
        ...(spec.query ? { query: spec.query as never } : {}),
        ...(spec.body ? { body: { content: { 'application/json': { schema: spec.body } } } } : {}),
        ...(spec.rawBody
          ? { body: { description: 'The provider callback, exactly as signed', content: { 'application/json': { schema: z.string() } } } }
          : {}),
      },
      responses,
    });
  }
}
