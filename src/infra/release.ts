import { readFileSync } from 'node:fs';

/**
 * The release this code is (package.json's version): two levels up from both src/infra and
 * dist/infra, where the image keeps package.json too.
 */
export const currentRelease: string = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

/** Orders two semantic versions by major, minor and patch (pre-release tags are not used here). */
export function compareReleases(a: string, b: string): number {
  const parts = (v: string) => v.split(/[.+-]/).slice(0, 3).map((n) => Number.parseInt(n, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < 3; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return 0;
}
