import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import express, { type NextFunction, type Request, type RequestHandler, type Response } from 'express';

/**
 * Where the built portal lives: `portal/dist` at the repository root, which is two levels above this
 * file both in the sources (src/api) and in a build (dist/api).
 */
export const defaultPortalAssetsDir = fileURLToPath(new URL('../../portal/dist', import.meta.url));

export interface PortalSettings {
  /** CSP frame-ancestors sources: `'none'` unless PORTAL_FRAME_ANCESTORS names origins. */
  frameAncestors: string;
  brandName: string;
  accentColor: string;
}

/** Only the page's own scripts, styles and API calls; nothing inline, nothing from elsewhere. */
export function portalCsp(frameAncestors: string): string {
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'none'",
    `frame-ancestors ${frameAncestors}`,
  ].join('; ');
}

const notBuiltPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Portal not built</title></head>
<body><h1>The portal assets are not built</h1>
<p>This server has no portal/dist/index.html. Build the portal with <code>npm run build:portal</code>, then reload this page.</p>
</body></html>
`;

const mount = '/portal';

/**
 * Serves the built portal under /portal/: hashed files under assets/ with a year-long cache, and
 * index.html (never cached) for /portal/ and every other path, so the page's own routes work on
 * reload. Every answer carries the CSP, no-referrer and nosniff headers; without a build, /portal/
 * answers 503 with a page saying how to build it. One handler at the root (not a mounted router),
 * so the app's route table stays flat.
 */
export function portalAssets(settings: PortalSettings, dir = defaultPortalAssetsDir): RequestHandler {
  const csp = portalCsp(settings.frameAncestors);
  const hashed = express.static(join(dir, 'assets'), { index: false, fallthrough: false, immutable: true, maxAge: '365d', redirect: false });
  const files = express.static(dir, { index: false, redirect: false, maxAge: 0 });
  const sendIndex = async (res: Response) => {
    const html = await readFile(join(dir, 'index.html')).catch(() => undefined);
    res.setHeader('cache-control', 'no-cache');
    if (!html) res.status(503).type('text/html; charset=utf-8').send(notBuiltPage);
    else res.status(200).type('text/html; charset=utf-8').send(html);
  };
  /** Runs a static handler on the path below `prefix`, putting the URL back if it passes. */
  const serveBelow = (handler: RequestHandler, prefix: string, req: Request, res: Response, next: NextFunction) => {
    const original = req.url;
    req.url = original.slice(prefix.length) || '/';
    handler(req, res, (err?: unknown) => {
      req.url = original;
      next(err);
    });
  };
  return (req, res, next) => {
    if (req.path !== mount && !req.path.startsWith(`${mount}/`)) return next();
    res.setHeader('content-security-policy', csp);
    res.setHeader('referrer-policy', 'no-referrer');
    res.setHeader('x-content-type-options', 'nosniff');
    if (req.method !== 'GET' && req.method !== 'HEAD') return next();
    // /portal without the slash: the page's relative asset URLs need the directory form.
    if (req.path === mount) return res.redirect(301, `${mount}/`);
    const fallback = (err?: unknown) => (err ? next(err) : sendIndex(res).catch(next));
    if (req.path.startsWith(`${mount}/assets/`)) return serveBelow(hashed, `${mount}/assets`, req, res, next);
    serveBelow(files, mount, req, res, fallback);
  };
}
