import type { Knex } from 'knex';
import type { Request, Response } from 'express';
import { constantTimeEqual } from '../domain/signing.js';
import { unauthorized } from '../domain/errors.js';
import { hashSecretToken } from '../domain/secret-token.js';
import { API_KEY_PREFIX, findApiKey } from '../store/api-keys-store.js';
import { PORTAL_SESSION_PREFIX, resolvePortalSession } from '../store/portal-sessions-store.js';
import type { ReadReplica } from '../infra/read-replica.js';
import { RecentMap } from '../domain/recent.js';
import { TenantScope } from '../store/tenant-scope.js';
import type { Middleware } from './route.js';

function bearer(req: Request): string | undefined {
  const header = req.headers.authorization;
  const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
  return match?.[1];
}

export function adminAuth(adminToken: string): Middleware {
  return (req, _res, next) => {
    const token = bearer(req);
    if (token && constantTimeEqual(token, adminToken)) return next();
    // Saying which credential was expected costs nothing: whether a string is shaped like an API key is public.
    if (token?.startsWith(API_KEY_PREFIX)) return next(unauthorized('this route needs the admin token (ADMIN_TOKEN), not a tenant API key'));
    if (token?.startsWith(PORTAL_SESSION_PREFIX)) return next(unauthorized('a portal session cannot reach admin routes'));
    next(unauthorized('admin token required: Authorization: Bearer <ADMIN_TOKEN>'));
  };
}

type ApiKey = NonNullable<Awaited<ReturnType<typeof findApiKey>>>;

/** How long a valid key is trusted without asking the database again: a revocation takes effect within this. */
const keyCacheMs = 1_000;
const keyCacheMax = 10_000;

/**
 * Valid keys seen in the last second, by the key's hash (the key itself is not kept): a busy tenant
 * publishing hundreds of events a second then costs one look-up a second, not one per request.
 */
function cachedKeys(platformDb: Knex): (token: string) => Promise<ApiKey | undefined> {
  const cache = new RecentMap<{ key: ApiKey; until: number }>(keyCacheMax);
  return async (token) => {
    const hash = hashSecretToken(token);
    const hit = cache.get(hash);
    if (hit && hit.until > Date.now()) return hit.key;
    // Trusted for a second from before the look-up, not after it: the answer reflects the database
    // as of some instant after `asked`, so a key revoked before then is never served past asked + 1 s.
    const asked = Date.now();
    const key = await findApiKey(platformDb, hash);
    if (key) cache.set(hash, { key, until: asked + keyCacheMs });
    else cache.delete(hash);
    return key;
  };
}

/**
 * Resolves the API key to its tenant and hands the route a scope that only sees that tenant. The
 * admin token is refused here with a message that says so: it administers tenants, it is not one.
 */
export function tenantAuth(platformDb: Knex, adminToken: string, reads?: ReadReplica): Middleware {
  const lookUp = cachedKeys(platformDb);
  return (req: Request, res: Response, next) => {
    const token = bearer(req);
    if (token?.startsWith(PORTAL_SESSION_PREFIX)) return portalSession(platformDb, token, res, next, reads);
    if (!token || !token.startsWith(API_KEY_PREFIX)) {
      const adminTokenSent = token !== undefined && constantTimeEqual(token, adminToken);
      return next(
        unauthorized(
          adminTokenSent
            ? 'this route needs a tenant API key (Authorization: Bearer sk_...), not the admin token; create a tenant with POST /admin/tenants to get one'
            : 'this route needs a tenant API key: Authorization: Bearer sk_...',
        ),
      );
    }
    lookUp(token).then(
      (key) => {
        if (!key) return next(unauthorized('API key is not valid'));
        res.locals.scope = new TenantScope(platformDb, key.tenantId, { type: 'api_key', id: key.keyId }, undefined, reads);
        next();
      },
      (err: unknown) => next(err),
    );
  };
}

/**
 * A portal session token: looked up on every request (no cache), so a revoked or expired session
 * answers 401 on its very next request. The scope carries the session's restriction; route.ts
 * refuses the routes a session may not call and every write of a read-only session.
 */
function portalSession(platformDb: Knex, token: string, res: Response, next: (err?: unknown) => void, reads?: ReadReplica): void {
  resolvePortalSession(platformDb, token).then(
    (found) => {
      if (found instanceof Error) return next(found);
      res.locals.scope = new TenantScope(platformDb, found.tenantId, { type: 'portal_session', id: found.restriction.sessionId }, found.restriction, reads);
      next();
    },
    (err: unknown) => next(err),
  );
}
