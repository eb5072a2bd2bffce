import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';

/** What the portal's browser suites share: Chromium's path, axe, screenshots, the XSS probe. */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** Every page photographed on each run lands here (git-ignored). */
export const screenshotDir = resolve(root, 'test-results/portal');
export const portalBuilt = resolve(root, 'portal/dist/index.html');
/** Debian's Chromium: browsers cannot be downloaded here, so the system one is launched by path. */
export const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/** Text that would run script if any page rendered it as HTML. */
export const hostile = '<img src=x onerror=window.__xss=1></script><script>window.__xss=1</script>';

export function prepareScreenshots(): void {
  mkdirSync(screenshotDir, { recursive: true });
}

/** Photographs the page and runs axe on it as it stands; serious and critical findings fail the test. */
export async function expectAccessible(p: Page, name: string): Promise<void> {
  await p.screenshot({ path: `${screenshotDir}/${name}.png`, fullPage: true });
  // Injected through the DevTools protocol, so the page's CSP (script-src 'self') does not apply.
  await p.evaluate(axeSource);
  // Browser-side code as text: this file is compiled without the DOM library.
  const violations = (await p.evaluate(
    'axe.run().then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })))',
  )) as { id: string; impact: string; nodes: number }[];
  expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), name).toEqual([]);
}

/** Neither the hostile text's script nor its image element made it into the page. */
export async function expectNoScriptRan(p: Page): Promise<void> {
  expect(await p.evaluate('typeof window.__xss')).toBe('undefined');
  expect(await p.locator('img[src="x"]').count()).toBe(0);
}

/** Moves the portal to a page by its address fragment, as a link or a typed address would. */
export async function go(p: Page, hash: string): Promise<void> {
  await p.evaluate(`location.hash = ${JSON.stringify(hash)}`);
}
