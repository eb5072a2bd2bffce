import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';

/** The built portal (npm ci builds it; `npm run build:portal` rebuilds it) stays small enough for slow links. */
const dist = resolve(dirname(fileURLToPath(import.meta.url)), '../../portal/dist');
const BUDGET_BYTES = 250 * 1024;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : [path];
  });
}

describe('portal assets', () => {
  it('weigh at most 250 KB gzipped in total, all served from the portal itself', () => {
    const all = files(dist);
    expect(all.map((f) => f.slice(dist.length + 1))).toContain('index.html');
    const total = all.reduce((sum, f) => sum + gzipSync(readFileSync(f), { level: 9 }).length, 0);
    expect(total).toBeLessThanOrEqual(BUDGET_BYTES);
    const html = readFileSync(join(dist, 'index.html'), 'utf8');
    // CSP `script-src 'self'`: no inline script and nothing from another origin.
    expect(html).not.toMatch(/<script(?![^>]*\ssrc=)[^>]*>/i);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//i);
  });
});
