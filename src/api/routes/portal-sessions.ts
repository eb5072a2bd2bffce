import { z } from 'zod';
import { notFound } from '../../domain/errors.js';
import { eventTypeFilterPattern } from '../../domain/event-types.js';
import { PORTAL_CAPABILITIES } from '../../domain/portal.js';
import {
  createPortalSession,
  exchangePortalLink,
  listPortalSessions,
  revokePortalSession,
  type PortalSessionInput,
} from '../../store/portal-sessions-store.js';
import { TenantScope } from '../../store/tenant-scope.js';
import { findTenant } from '../../store/tenants-store.js';
import type { ApiContext } from '../context.js';
import type { ApiRoutes } from '../route.js';
import { idParams, page, pageQuery } from '../schemas.js';

const tag = 'portal-sessions';

export const createPortalSessionBody = z
  .strictObject({
    expiresInSeconds: z.number().int().min(60).max(604_800).default(3600).describe('How long the link and its session work (60 s to 7 days)'),
    capabilities: z
      .union([z.tuple([z.literal('read')]), z.tuple([z.literal('read'), z.literal('manage')])])
      .default(['read'])
      .describe('`["read"]` looks only; `["read","manage"]` may also change endpoints, send tests and replay'),
    endpointIds: z.array(z.string().min(1).max(100)).min(1).max(100).optional().describe("Only these endpoints (each must be one of the tenant's) and their deliveries and events"),
    eventTypes: z
      .array(z.string().regex(eventTypeFilterPattern, 'must be an event type, or a prefix ending in .*').max(200))
      .min(1)
      .max(100)
      .optional()
      .describe('Only events and deliveries of these types; an entry ending in `.*` is a prefix'),
  })
  .meta({ id: 'CreatePortalSession' });

const portalSessionCreated = z
  .object({
    id: z.string(),
    url: z.string().describe('Open once: the link token is in the fragment, which servers and Referer headers never see'),
    expiresAt: z.string(),
  })
  .meta({ id: 'PortalSessionCreated' });

const portalSessionSchema = z
  .object({
    id: z.string(),
    capabilities: z.array(z.enum(PORTAL_CAPABILITIES)),
    scope: z.object({ endpointIds: z.array(z.string()).describe('Empty: every endpoint'), eventTypes: z.array(z.string()).describe('Empty: every type') }),
    createdAt: z.string(),
    expiresAt: z.string(),
    exchangedAt: z.string().nullable(),
    revokedAt: z.string().nullable(),
  })
  .meta({ id: 'PortalSession' });

const exchangeBody = z.strictObject({ token: z.string().min(1).max(200) }).meta({ id: 'PortalLinkExchange' });

const exchanged = z
  .object({
    id: z.string().describe("The session's id: what the audit log names as the actor of its changes, and what DELETE /v1/portal-sessions/{id} ends"),
    sessionToken: z.string().describe('Send as Authorization: Bearer on /v1 routes; keep it in memory only'),
    expiresAt: z.string(),
    capabilities: z.array(z.enum(PORTAL_CAPABILITIES)),
    endpointIds: z.array(z.string()).describe('Empty: every endpoint'),
    eventTypes: z.array(z.string()).describe('Empty: every type'),
    tenant: z.object({ id: z.string(), name: z.string() }),
    brand: z.object({ name: z.string(), accentColor: z.string() }),
  })
  .meta({ id: 'PortalSessionExchanged' });

/**
 * Portal links: a tenant (or the admin for it) creates a short-lived, scoped, single-use link; the
 * portal page exchanges it once for a session token. See docs/api.md "Portal links".
 */
export function portalSessionRoutes(routes: ApiRoutes, ctx: ApiContext): void {
  const create = async (scope: TenantScope, body: PortalSessionInput) => {
    const created = await createPortalSession(scope, body);
    return {
      status: 201,
      body: { id: created.id, url: `${ctx.config.publicBaseUrl}/portal/#token=${created.linkToken}`, expiresAt: created.expiresAt },
    };
  };
  routes.add(
    {
      method: 'post',
      path: '/v1/portal-sessions',
      operationId: 'createPortalSession',
      summary: 'Create a single-use, scoped, short-lived link to the portal',
      tag,
      auth: 'tenant',
      body: createPortalSessionBody,
      success: { status: 201, description: 'Created; the link is in this answer only', schema: portalSessionCreated },
    },
    async ({ body, scope }) => create(scope, body),
  );
  routes.add(
    {
      method: 'get',
      path: '/v1/portal-sessions',
      operationId: 'listPortalSessions',
      reads: 'replica',
      summary: "List this tenant's portal sessions (never their tokens)",
      tag,
      auth: 'tenant',
      query: z.strictObject(pageQuery),
      success: { status: 200, description: 'A page of portal sessions, newest first', schema: page(portalSessionSchema) },
    },
    async ({ query, scope }) => ({ status: 200, body: await listPortalSessions(scope, query) }),
  );
  routes.add(
    {
      method: 'delete',
      path: '/v1/portal-sessions/:id',
      operationId: 'revokePortalSession',
      summary: 'End a portal session at once: its link and its session token stop working',
      tag,
      auth: 'tenant',
      params: idParams,
      success: { status: 204, description: 'Revoked: the next request with it answers 401 session_revoked' },
      errors: [404],
    },
    async ({ params, scope }) => {
      if (!(await revokePortalSession(scope, params.id))) throw notFound('portal session');
      return { status: 204 };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/v1/portal-sessions/exchange',
      operationId: 'exchangePortalLink',
      summary: 'Exchange a portal link token, once, for a session token',
      tag,
      auth: 'link',
      body: exchangeBody,
      success: { status: 200, description: 'The session', schema: exchanged },
      errors: [401],
    },
    async ({ body }) => {
      const { sessionToken, row, tenant } = await exchangePortalLink(ctx.platformDb, body.token);
      return {
        status: 200,
        headers: { 'cache-control': 'no-store' },
        body: {
          id: row.id,
          sessionToken,
          expiresAt: row.expires_at.toISOString(),
          capabilities: row.capabilities,
          endpointIds: row.endpoint_ids ?? [],
          eventTypes: row.event_types ?? [],
          tenant: { id: tenant.id, name: tenant.name },
          brand: { name: ctx.config.portal.brandName, accentColor: ctx.config.portal.accentColor },
        },
      };
    },
  );
  routes.add(
    {
      method: 'post',
      path: '/admin/tenants/:id/portal-sessions',
      operationId: 'createTenantPortalSession',
      summary: 'Create a portal link for a tenant (as POST /v1/portal-sessions)',
      tag: 'admin',
      auth: 'admin',
      params: idParams,
      body: createPortalSessionBody,
      success: { status: 201, description: 'Created; the link is in this answer only', schema: portalSessionCreated },
      errors: [404],
    },
    async ({ params, body }) => {
      const tenant = await findTenant(ctx.platformDb, params.id);
      if (!tenant) throw notFound('tenant');
      return create(TenantScope.forAdmin(ctx.platformDb, tenant.id), body);
    },
  );
}
