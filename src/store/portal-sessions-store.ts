import type { Knex } from 'knex';
import { AppError, ValidationError } from '../domain/errors.js';
import { idOfUuid, newId, uuidOfId } from '../domain/ids.js';
import type { PortalCapability } from '../domain/portal.js';
import { hashSecretToken, newSecretToken } from '../domain/secret-token.js';
import { audit } from './audit-store.js';
import { paginate, type Page } from './pagination.js';
import type { SessionRestriction, TenantScope } from './tenant-scope.js';

/** The single-use link secret (in the URL fragment) and the session token it is exchanged for. */
export const PORTAL_LINK_PREFIX = 'psl_';
export const PORTAL_SESSION_PREFIX = 'pst_';


export interface PortalSessionRow {
  id: string;
  tenant_id: string;
  link_hash: string;
  session_hash: string | null;
  capabilities: PortalCapability[];
  endpoint_ids: string[] | null;
  event_types: string[] | null;
  created_at: Date;
  expires_at: Date;
  exchanged_at: Date | null;
  revoked_at: Date | null;
}

export interface PortalSessionInput {
  expiresInSeconds: number;
  capabilities: PortalCapability[];
  endpointIds?: string[];
  eventTypes?: string[];
}

export const rowToPortalSession = (r: PortalSessionRow) => ({
  id: r.id,
  capabilities: r.capabilities,
  scope: { endpointIds: r.endpoint_ids ?? [], eventTypes: r.event_types ?? [] },
  createdAt: r.created_at.toISOString(),
  expiresAt: r.expires_at.toISOString(),
  exchangedAt: r.exchanged_at?.toISOString() ?? null,
  revokedAt: r.revoked_at?.toISOString() ?? null,
});

/**
 * A new session with its link token (returned once, stored hashed). Every endpoint in scope must be
 * one of the tenant's live endpoints: a link naming another tenant's endpoint is refused with 400.
 */
export async function createPortalSession(scope: TenantScope, input: PortalSessionInput): Promise<{ id: string; linkToken: string; expiresAt: string }> {
  return scope.transaction(async (s) => {
    if (input.endpointIds) {
      const keys = input.endpointIds.map((id) => uuidOfId('endpoint', id)).filter((key) => key !== null);
      const found: Array<{ id: string }> = await s.from('endpoints').whereNull('endpoints.deleted_at').whereIn('endpoints.id', keys).select('endpoints.id');
      const known = new Set(found.map((r) => idOfUuid('endpoint', r.id)));
      const problems = input.endpointIds.flatMap((id, i) => (known.has(id) ? [] : [{ path: `endpointIds.${i}`, message: `no endpoint ${id} in this tenant` }]));
      if (problems.length > 0) throw new ValidationError(problems);
    }
    const id = newId('portalSession');
    const linkToken = newSecretToken(PORTAL_LINK_PREFIX);
    const [row] = (await s
      .insert('portal_sessions', {
        id,
        link_hash: hashSecretToken(linkToken),
        capabilities: input.capabilities,
        endpoint_ids: input.endpointIds ?? null,
        event_types: input.eventTypes ?? null,
        expires_at: s.expression('now() + make_interval(secs => :seconds)', { seconds: input.expiresInSeconds }),
      })
      .returning('expires_at')) as Array<{ expires_at: Date }>;
    await audit(s, {
      action: 'portal_session.created',
      targetType: 'portal_session',
      targetId: id,
      details: { capabilities: input.capabilities, endpointIds: input.endpointIds ?? null, eventTypes: input.eventTypes ?? null, expiresAt: row!.expires_at.toISOString() },
    });
    return { id, linkToken, expiresAt: row!.expires_at.toISOString() };
  });
}

export async function listPortalSessions(scope: TenantScope, opts: { limit: number; cursor?: string }): Promise<Page<ReturnType<typeof rowToPortalSession>>> {
  return paginate(scope.from('portal_sessions').select('portal_sessions.*'), 'portal_sessions.id', opts, rowToPortalSession);
}

/** Ends the session at once: the link and the session token both answer 401 `session_revoked` from now on. */
export async function revokePortalSession(scope: TenantScope, id: string): Promise<boolean> {
  return scope.transaction(async (s) => {
    const row: PortalSessionRow | undefined = await s.from('portal_sessions').where('portal_sessions.id', id).forUpdate().first('portal_sessions.*');
    if (!row) return false;
    if (!row.revoked_at) {
      await s.from('portal_sessions').where('portal_sessions.id', id).update({ revoked_at: s.now() });
      await audit(s, { action: 'portal_session.revoked', targetType: 'portal_session', targetId: id });
    }
    return true;
  });
}

const linkError = (code: string, message: string) => new AppError(401, code, message);

/** Why a link or a session no longer works, in words the portal can show as they are. */
function refusal(row: PortalSessionRow, what: 'link' | 'session'): AppError | undefined {
  if (row.revoked_at) return linkError('session_revoked', `This portal ${what} has been revoked. Ask for a new link.`);
  if (row.expires_at.getTime() <= Date.now()) {
    return what === 'link'
      ? linkError('link_expired', 'This portal link has expired. Ask for a new link.')
      : linkError('session_expired', 'This portal session has expired. Ask for a new link.');
  }
  return undefined;
}

/**
 * Exchanges a link token, once, for a session token. The row is locked so two exchanges of the same
 * link cannot both succeed; the second answers `link_used`. Unscoped: the token is what tells whose
 * session it is.
 */
export async function exchangePortalLink(platformDb: Knex, linkToken: string) {
  return platformDb.transaction(async (trx) => {
    const row: PortalSessionRow | undefined = linkToken.startsWith(PORTAL_LINK_PREFIX)
      ? await trx('portal_sessions').where({ link_hash: hashSecretToken(linkToken) }).forUpdate().first()
      : undefined;
    if (!row) throw linkError('unauthorized', 'This portal link is not valid. Check that you copied the whole link, or ask for a new one.');
    const refused = refusal(row, 'link');
    if (refused) throw refused;
    if (row.exchanged_at) throw linkError('link_used', 'This portal link has already been used. Each link opens the portal once; ask for a new link.');
    const sessionToken = newSecretToken(PORTAL_SESSION_PREFIX);
    await trx('portal_sessions').where({ id: row.id }).update({ session_hash: hashSecretToken(sessionToken), exchanged_at: trx.fn.now() });
    const stored: { id: string; name: string } = await trx('tenants').where({ id: row.tenant_id }).first('id', 'name');
    return { sessionToken, row, tenant: { id: idOfUuid('tenant', stored.id), name: stored.name } };
  });
}

/**
 * The session a session token belongs to, as a restriction for the tenant scope; an error saying why
 * when it no longer works. Looked up on every request: a revocation takes effect on the next one.
 */
export async function resolvePortalSession(platformDb: Knex, sessionToken: string): Promise<{ tenantId: string; restriction: SessionRestriction } | AppError> {
  const row: PortalSessionRow | undefined = await platformDb('portal_sessions').where({ session_hash: hashSecretToken(sessionToken) }).first();
  if (!row) return linkError('unauthorized', 'This portal session is not valid. Open the portal again from a new link.');
  const refused = refusal(row, 'session');
  if (refused) return refused;
  return {
    tenantId: idOfUuid('tenant', row.tenant_id),
    restriction: {
      sessionId: row.id,
      manage: row.capabilities.includes('manage'),
      ...(row.endpoint_ids ? { endpointIds: row.endpoint_ids } : {}),
      ...(row.event_types ? { eventTypes: row.event_types } : {}),
    },
  };
}
