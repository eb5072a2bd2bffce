import { Router, type Request, type Response } from 'express';
import type { OpenAPIRegistry, ResponseConfig, RouteConfig } from '@asteasolutions/zod-to-openapi';
import { z, type ZodType } from 'zod';
import { forbidden, refusal, type CodedProblem, type Problem } from '../domain/errors.js';
import type { PortalCapability } from '../domain/portal.js';
import type { ReadTolerance } from '../domain/read-consistency.js';
import { stringifyJson } from '../domain/raw-json.js';
import { holdsNul, NUL_REFUSAL } from '../domain/text.js';
import type { TenantScope } from '../store/tenant-scope.js';
import { errorSchema } from './schemas.js';

/** `link`: no credential header; the body carries a portal link token (POST /v1/portal-sessions/exchange). */
export type AuthKind = 'admin' | 'tenant' | 'signature' | 'link' | 'none';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface SuccessSpec {
  status: number;
  description: string;
  schema?: ZodType;
}

export interface RouteSpec<B extends ZodType, Q extends ZodType, P extends ZodType, H extends ZodType> {
  method: 'get' | 'post' | 'patch' | 'delete';
  /** Express syntax (`/v1/endpoints/:id`); the OpenAPI path is derived from it. */
  path: string;
  /** Stable name of the operation in /openapi.json, and of its method in generated clients. */
  operationId: string;
  summary: string;
  tag: string;
  auth: AuthKind;
  body?: B;
  /** Query parameters; a parameter the schema does not name is refused, like an unknown body field. */
  query?: Q;
  params?: P;
  /** Request headers the route reads, keyed by their canonical name (e.g. `Idempotency-Key`). */
  headers?: H;
  /** Every success the route answers; the first is the usual one. */
  success: SuccessSpec | SuccessSpec[];
  errors?: number[];
  /** The inbound route documents its body as opaque bytes: the signature covers them exactly. */
  rawBody?: boolean;
  /**
   * Whether a portal session may call this tenant route. Absent: refused (403), so a new route is
   * closed to sessions until someone decides otherwise. `scoped`: the route reads and writes only
   * through TenantScope.from, which narrows every query to the session's endpoints and event
   * types. `tenant-wide`: allowed only to a session with no endpoint or event-type restriction
   * (e.g. creating an endpoint). Either way a write needs the `manage` capability.
   */
  portal?: PortalAccess;
  /**
   * The capability a portal session needs here: `read` for a GET and `manage` for anything else
   * unless declared. A GET that reveals a credential declares `manage`: whoever reads an endpoint's
   * signing secret can forge its webhooks, which is more than looking.
   */
  portalCapability?: PortalCapability;
  /**
   * How stale this route's answer may be (src/domain/read-consistency.ts): declared, the handler
   * runs on the read replica when the replica is fresh enough. Only for handlers that write
   * nothing. Absent: the primary. Listed per route in docs/api.md.
   */
  reads?: ReadTolerance;
}

export type PortalAccess = 'scoped' | 'tenant-wide';

const portalCapabilityOf = (spec: { method: string; portalCapability?: PortalCapability }): PortalCapability =>
  spec.portalCapability ?? (spec.method === 'get' ? 'read' : 'manage');

/** Refuses what a portal session may not do on this route; nothing for an API key. */
function portalRefusal(spec: { method: string; portal?: PortalAccess; portalCapability?: PortalCapability }, scope: TenantScope | undefined): Error | undefined {
  const session = scope?.session;
  if (!session) return undefined;
  if (!spec.portal) return forbidden('a portal link cannot use this part of the API; use an API key');
  if (spec.portal === 'tenant-wide' && scope.narrowed) return forbidden('this portal link is limited to some endpoints or event types, so it cannot do this');
  if (portalCapabilityOf(spec) === 'manage' && !session.manage) {
    return forbidden(spec.method === 'get' ? 'this portal link is read-only: showing this needs a link that can manage' : 'this portal link is read-only: it can look, not change anything');
  }
  return undefined;
}

export interface RouteContext<B, Q, P, H> {
  req: Request;
  res: Response;
  body: B;
  query: Q;
  params: P;
  headers: H;
  scope: TenantScope;
}

export type Middleware = (req: Request, res: Response, next: (err?: unknown) => void) => void;

const errorDescriptions: Record<number, string> = {
  400: 'Invalid request; every problem is listed in error.details',
  401: 'Missing or invalid credentials',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Conflicts with the current state',
  413: 'Body larger than the limit',
  415: 'Body is not JSON (send Content-Type: application/json), or its encoding is not supported',
  429: 'Too many requests for this tenant; retry after the Retry-After delay',
  503: 'Storage unavailable; retry after the Retry-After delay',
};
const retryAfter = { 'Retry-After': { description: 'Seconds to wait before retrying', schema: { type: 'integer' as const } } };

/** The statuses every route of an authentication kind can answer, whatever the route does. */
function statusesOf(spec: RouteSpec<ZodType, ZodType, ZodType, ZodType>): number[] {
  switch (spec.auth) {
    case 'tenant':
      return [400, 401, 403, 413, 415, 429, 503];
    case 'admin':
      return [400, 401, 413, 415, 503];
    case 'signature':
      return spec.params ? [400] : [];
    case 'link':
      return [400, 401, 413, 415, 503];
    case 'none':
      return [400]; // an unknown query parameter
  }
}

/**
 * Zod's wording, except for a missing value, which it would call "expected string, received
 * undefined": the person reading the error wants to hear that the field is required.
 */
const wording = (issue: { code: string; input?: unknown }) => (issue.code === 'invalid_type' && issue.input === undefined ? 'required' : undefined);

function isObject(value: unknown): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

type ZodDef = { type: string; innerType?: ZodType; in?: ZodType; element?: ZodType; shape?: Record<string, ZodType>; valueType?: ZodType };
const wrappers = new Set(['optional', 'nullable', 'default', 'prefault', 'readonly', 'nonoptional', 'catch']);

/**
 * Every string in `value` that holds U+0000: PostgreSQL text cannot, so it would fail its statement
 * as a 500 instead of being refused with its path. Opaque payloads (`z.unknown()`, an event's data)
 * are skipped: they are stored as the JSON text received, where the NUL is an escape. So are
 * members an object does not name, which are refused as unknown already; a member name is never
 * stored as text but by the field it names (a record's names have their own rules: headers, filters).
 */
function nulProblems(schema: ZodType | undefined, value: unknown, path: string[]): Problem[] {
  let def = (schema as { _zod?: { def: ZodDef } } | undefined)?._zod?.def;
  while (def && (wrappers.has(def.type) || def.type === 'pipe')) {
    def = ((def.type === 'pipe' ? def.in : def.innerType) as { _zod?: { def: ZodDef } } | undefined)?._zod?.def;
  }
  if (def?.type === 'unknown' || def?.type === 'any') return [];
  const at = (key: string) => [...path, key];
  if (typeof value === 'string') return holdsNul(value) ? [{ path: path.join('.'), message: NUL_REFUSAL }] : [];
  if (Array.isArray(value)) return value.flatMap((item, i) => nulProblems(def?.type === 'array' ? def.element : undefined, item, at(String(i))));
  if (!isObject(value)) return [];
  return Object.entries(value as Record<string, unknown>).flatMap(([key, item]) => {
    if (def?.type === 'object' && !def.shape?.[key]) return [];
    return nulProblems(def?.type === 'object' ? def.shape?.[key] : def?.type === 'record' ? def.valueType : undefined, item, at(key));
  });
}

/** Every problem `schema` finds in `value`, with `where` naming the root (body, query, params, headers). */
function problemsIn(schema: ZodType, value: unknown, where: 'body' | 'query' | 'params' | 'headers'): { data?: unknown; problems: CodedProblem[] } {
  // A route whose body is optional (e.g. pause, with an optional reason) may be called without one.
  if (where === 'body' && value === undefined && schema.safeParse(undefined).success) return { data: undefined, problems: [] };
  if (where === 'body' && !isObject(value)) {
    return { problems: [{ path: 'body', message: value === undefined ? 'a JSON object is required' : 'body must be a JSON object' }] };
  }
  const result = schema.safeParse(value, { error: wording });
  const nul = nulProblems(schema, value, []).map((p) => ({ ...p, path: p.path || where }));
  if (result.success && nul.length === 0) return { data: result.data, problems: [] };
  const unknown = where === 'query' ? 'unknown query parameter' : where === 'headers' ? 'unknown header' : 'unknown field';
  const problems = (result.success ? [] : result.error.issues).flatMap((issue): CodedProblem[] => {
    const at = issue.path.map(String);
    if (issue.code === 'unrecognized_keys') return issue.keys.map((key) => ({ path: [...at, key].join('.'), message: unknown }));
    const code = issue.code === 'custom' ? (issue.params as { code?: string } | undefined)?.code : undefined;
    return [{ path: at.length > 0 ? at.join('.') : where, message: issue.message, ...(code && { code }) }];
  });
  return { problems: [...problems, ...nul] };
}

/** Query parameters are refused when the route does not name them: a typo must not silently widen a search. */
const noQuery = z.strictObject({});

/** The declared headers, read case-insensitively (Node lowercases names; the schema keeps canonical ones). */
function headersOf(req: Request, schema: ZodType): Record<string, string | undefined> {
  const shape = (schema as unknown as { shape?: Record<string, unknown> }).shape ?? {};
  return Object.fromEntries(Object.keys(shape).map((name) => [name, req.get(name)]));
}

/**
 * res.json, except that RawJson values are written as their own text: an event's payload is shown
 * as it was received and stored, not as JSON.parse and JSON.stringify would rewrite it.
 */
function sendJson(res: Response, status: number, body: unknown): void {
  if (!res.get('content-type')) res.type('application/json');
  res.status(status).send(stringifyJson(body));
}

/**
 * Every route is declared through here, so the schema that validates a request is the schema that
 * documents it: /openapi.json cannot drift from what the server accepts.
 */
export class ApiRoutes {
  readonly router = Router();
  private readonly operationIds = new Set<string>();

  constructor(
    private readonly registry: OpenAPIRegistry,
    private readonly auth: Record<AuthKind, Middleware[]>,
  ) {}

  add<
    B extends ZodType = ZodType<undefined>,
    Q extends ZodType = ZodType<undefined>,
    P extends ZodType = ZodType<undefined>,
    H extends ZodType = ZodType<undefined>,
  >(spec: RouteSpec<B, Q, P, H>, handler: (ctx: RouteContext<z.output<B>, z.output<Q>, z.output<P>, z.output<H>>) => Promise<Reply>): void {
    if (this.operationIds.has(spec.operationId)) throw new Error(`operationId ${spec.operationId} is used twice`);
    this.operationIds.add(spec.operationId);
    // Provider callbacks are not ours to reject for a query string a provider (or the tenant who
    // configured it) appended; every other route refuses parameters it does not know.
    const query: ZodType | undefined = spec.query ?? (spec.auth === 'signature' ? undefined : noQuery);
    this.document(spec, query);
    this.router[spec.method](spec.path, ...this.auth[spec.auth], async (req: Request, res: Response) => {
      const refused = portalRefusal(spec, res.locals.scope as TenantScope | undefined);
      if (refused) throw refused;
      // Every part is checked before anything is refused, so one answer lists every problem.
      const parts = {
        params: spec.params ? problemsIn(spec.params, req.params, 'params') : { data: req.params, problems: [] },
        query: query ? problemsIn(query, req.query, 'query') : { data: req.query, problems: [] },
        headers: spec.headers ? problemsIn(spec.headers, headersOf(req, spec.headers), 'headers') : { data: undefined, problems: [] },
        body: spec.body ? problemsIn(spec.body, req.body, 'body') : { data: req.body as unknown, problems: [] },
      };
      const problems = Object.values(parts).flatMap((part) => part.problems);
      if (problems.length > 0) throw refusal(problems);
      const run = (scope: TenantScope) =>
        handler({
          req,
          res,
          body: parts.body.data as z.output<B>,
          query: parts.query.data as z.output<Q>,
          params: parts.params.data as z.output<P>,
          headers: parts.headers.data as z.output<H>,
          scope,
        });
      const scope = res.locals.scope as TenantScope | undefined;
      const reply = spec.reads && scope ? await scope.forReads(spec.reads, run) : await run(scope as TenantScope);
      if (res.headersSent) return; // the handler streamed its own answer (e.g. /metrics)
      for (const [name, value] of Object.entries(reply.headers ?? {})) res.setHeader(name, value);
      if (reply.body === undefined) res.status(reply.status).end();
      else sendJson(res, reply.status, reply.body);
    });
  }

  private document(spec: RouteSpec<ZodType, ZodType, ZodType, ZodType>, query: ZodType | undefined): void {
    const security =
      spec.auth === 'admin' ? [{ adminToken: [] }] : spec.auth === 'tenant' ? [{ apiKey: [] }] : [];
    const responses: RouteConfig['responses'] = {};
    for (const success of Array.isArray(spec.success) ? spec.success : [spec.success]) {
      responses[success.status] = {
        description: success.description,
        ...(success.schema ? { content: { 'application/json': { schema: success.schema } } } : {}),
      };
    }
    const errors = new Set([...statusesOf(spec), ...(spec.errors ?? [])]);
    for (const status of [...errors].sort((a, b) => a - b)) {
      const response: ResponseConfig = { description: errorDescriptions[status] ?? 'Error', content: { 'application/json': { schema: errorSchema } } };
      if (status === 429 || status === 503) response.headers = retryAfter;
      responses[status] = response;
    }
    const hasQuery = query !== undefined && Object.keys((query as unknown as { shape?: object }).shape ?? {}).length > 0;
    this.registry.registerPath({
      ...(spec.auth === 'tenant' ? { 'x-portal-session': spec.portal ?? 'refused' } : {}),
      ...(spec.auth === 'tenant' && spec.portal ? { 'x-portal-capability': portalCapabilityOf(spec) } : {}),
      ...(spec.reads ? { 'x-reads': spec.reads } : {}),
      method: spec.method,
      path: spec.path.replace(/:([A-Za-z]+)/g, '{$1}'),
      operationId: spec.operationId,
      summary: spec.summary,
      tags: [spec.tag],
      security,
      request: {
        ...(spec.params ? { params: spec.params as never } : {}),
        ...(hasQuery ? { query: query as never } : {}),
        ...(spec.headers ? { headers: spec.headers as never } : {}),
        ...(spec.body ? { body: { required: !spec.body.safeParse(undefined).success, content: { 'application/json': { schema: spec.body } } } } : {}),
        ...(spec.rawBody
          ? {
              body: {
                required: true,
                description: 'The provider callback, exactly as signed: the signature is verified over these bytes before they are parsed',
                content: { 'application/json': { schema: z.record(z.string(), z.unknown()) } },
              },
            }
          : {}),
      },
      responses,
    });
  }
}
