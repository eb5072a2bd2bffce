import type { Knex } from 'knex';
import type { Request, Response } from 'express';
import { constantTimeEqual } from '../domain/signing.js';
import { unauthorized } from '../domain/errors.js';
import { findApiKey } from '../store/tenants-store.js';
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
    next(token && constantTimeEqual(token, adminToken) ? undefined : unauthorized('admin token required'));
  };
}

/** Resolves the API key to its tenant and hands the route a scope that only sees that tenant. */
export function tenantAuth(db: Knex): Middleware {
  return (req: Request, res: Response, next) => {
    const token = bearer(req);
    if (!token || !token.startsWith('sk_')) return next(unauthorized('API key required'));
    findApiKey(db, token).then(
      (key) => {
        if (!key) return next(unauthorized('API key is not valid'));
        res.locals.scope = new TenantScope(db, key.tenantId, { type: 'api_key', id: key.keyId });
        next();
      },
      (err: unknown) => next(err),
    );
  };
}
