import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The tenant portal in a real browser against a real platform: a link opens a session, an endpoint
 * is created, a test event is delivered to a real receiver and its attempt shown; every page passes
 * axe without serious or critical findings, and hostile text stays text.
 */

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const shots = resolve(root, 'test-results/portal');
const chromiumPath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const hostile = '<img src=x onerror=window.__xss=1></script><script>window.__xss=1</script>';

let platform: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;
let browser: Browser;
let page: Page;
const problems: string[] = [];

async function createLink(): Promise<{ id: string; url: string }> {
  const res = await tenant.call('POST', '/v1/portal-sessions', { body: { capabilities: ['read', 'manage'] } });
  expect(res.status, res.text).toBe(201);
  const hash = new URL(res.body.url as string).hash;
  expect(hash).toMatch(/^#token=/);
  return { id: res.body.id as string, url: `${platform.url}/portal/${hash}` };
}

const linkUrl = async () => (await createLink()).url;

/** A page whose script errors, CSP violations and unexpected error answers are collected in `problems`. */
async function openPage(opts: { sessionEnds?: boolean } = {}): Promise<Page> {
  const p = await browser.newPage({ viewport: { width: 1024, height: 800 } });
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Answers the page expects (401 for a used link) are logged as failed loads; those are not problems.
  p.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && problems.push(`console: ${m.text()}`));
  p.on('response', (r) => {
    const expected = r.status() === 401 && (opts.sessionEnds || r.url().endsWith('/v1/portal-sessions/exchange'));
    if (r.status() >= 400 && !expected) problems.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  });
  return p;
}

/** Runs axe on the page as it stands; serious and critical findings fail the test. */
async function expectAccessible(p: Page, name: string): Promise<void> {
  await p.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
  // Injected through the DevTools protocol, so the page's CSP (script-src 'self') does not apply.
  await p.evaluate(axeSource);
  // Browser-side code as text: this file is compiled without the DOM library.
  const violations = (await p.evaluate(
    'axe.run().then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.length })))',
  )) as { id: string; impact: string; nodes: number }[];
  expect(violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), name).toEqual([]);
}

async function expectNoScriptRan(p: Page): Promise<void> {
  expect(await p.evaluate('typeof window.__xss')).toBe('undefined');
  expect(await p.locator('img[src="x"]').count()).toBe(0);
}

beforeAll(async () => {
  expect(existsSync(resolve(root, 'portal/dist/index.html')), 'portal/dist is built (npm run build:portal)').toBe(true);
  mkdirSync(shots, { recursive: true });
  platform = await startTestPlatform({ role: 'all' });
  tenant = await platform.createTenant('Acme');
  receiver = await startReceiver();
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  page = await openPage();
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await platform?.stop();
});

describe('tenant portal', () => {
  it('opens from a link, which leaves the address bar at once', async () => {
    await page.goto(await linkUrl());
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    expect(page.url()).not.toContain('token');
    expect(await page.evaluate('[localStorage.length, sessionStorage.length, document.cookie]')).toEqual([0, 0, '']);
    await expectAccessible(page, 'endpoints-empty');
  });

  it('creates an endpoint whose hostile description renders as text', async () => {
    await page.getByLabel('URL').fill(`${receiver.url}/hooks`);
    await page.getByLabel('Event types').fill('order.created, portal.test');
    await page.getByLabel('Description (optional)').fill(hostile);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByText('Endpoint created.').waitFor();
    const card = page.locator('li.card', { hasText: `${receiver.url}/hooks` });
    await card.waitFor();
    expect(await card.getByText(hostile, { exact: true }).count()).toBe(1);
    await expectNoScriptRan(page);
    await expectAccessible(page, 'endpoints-created');
  });

  it('sends a test event and follows its delivery until it succeeds', async () => {
    const card = page.locator('li.card', { hasText: `${receiver.url}/hooks` });
    await card.getByRole('button', { name: 'Send test event' }).click();
    await card.locator('[data-delivery-status]', { hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    expect(receiver.requests.length).toBe(1);
    await page.screenshot({ path: `${shots}/endpoints-test-sent.png`, fullPage: true });

    await card.getByRole('link', { name: 'details' }).click();
    await page.getByRole('heading', { level: 1, name: 'Delivery' }).waitFor();
    const attempt = page.locator('ol.attempts > li');
    await attempt.first().getByRole('heading', { name: 'Attempt 1: success' }).waitFor();
    await expect.poll(() => attempt.first().innerText()).toContain('200');
    expect(await attempt.first().innerText()).toContain('{"ok":true}');
    await expectAccessible(page, 'delivery-detail');
  });

  it('shows event data as text on the delivery page', async () => {
    const eventId = await publish(tenant, { type: 'order.created', data: { note: hostile } });
    const deliveryId = await eventually(async () => {
      const res = await tenant.call('GET', `/v1/deliveries?eventId=${eventId}&status=succeeded`);
      return (res.body.data as { id: string }[])[0]?.id;
    }, 'the event delivered');
    await page.evaluate(`location.hash = ${JSON.stringify(`#/deliveries/${deliveryId}`)}`);
    const payload = page.locator('[data-event-payload]', { hasText: eventId });
    await payload.waitFor();
    expect(await payload.innerText()).toContain(JSON.stringify(hostile).slice(1, -1));
    await expectNoScriptRan(page);
  });

  it('lists deliveries filtered by endpoint and status, by keyboard', async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Deliveries' }).click();
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    const rows = page.locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    await page.getByLabel('Status').selectOption('dead');
    await page.getByText('No deliveries match.').waitFor();
    await page.getByLabel('Status').selectOption('succeeded');
    await expect.poll(() => rows.count()).toBe(2);
    await page.getByLabel('Endpoint').selectOption({ label: `${receiver.url}/hooks` });
    await expect.poll(() => page.url()).toContain('endpointId=');
    await expect.poll(() => rows.count()).toBe(2);
    // Keyboard: Tab reaches a delivery link and Enter opens it.
    await page.locator('tbody a').first().focus();
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Delivery' }).waitFor();
    await page.goBack();
    await rows.first().waitFor();
    await expectAccessible(page, 'deliveries');
  });

  it('fits a 360 px screen and a dark colour scheme', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
    await expectAccessible(page, 'endpoints-360-dark');
  });

  it('says plainly when a link was used already, is not valid or is missing', async () => {
    const url = await linkUrl();
    const first = await openPage();
    await first.goto(url);
    await first.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await first.close();
    const again = await openPage();
    await again.goto(url);
    await again.getByRole('heading', { level: 1, name: 'This link has already been used' }).waitFor();
    await expectAccessible(again, 'link-used');
    await again.close();

    const forged = await openPage();
    await forged.goto(`${platform.url}/portal/#token=not-a-link`);
    await forged.getByRole('heading', { level: 1, name: 'This link is not valid' }).waitFor();
    await forged.goto('about:blank');
    await forged.goto(`${platform.url}/portal/`);
    await forged.getByRole('heading', { level: 1, name: 'No portal link' }).waitFor();
    await forged.close();
  });

  it('ends the page when its session is revoked', async () => {
    const link = await createLink();
    const p = await openPage({ sessionEnds: true });
    await p.goto(link.url);
    await p.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    expect((await tenant.call('DELETE', `/v1/portal-sessions/${link.id}`)).status).toBe(204);
    await p.getByRole('navigation').getByRole('link', { name: 'Deliveries' }).click();
    await p.getByRole('heading', { level: 1, name: 'This session was ended' }).waitFor();
    await expectAccessible(p, 'session-revoked');
    await p.close();
  });

  it('ran without script errors or CSP violations', () => {
    expect(problems).toEqual([]);
  });
});
