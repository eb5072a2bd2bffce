import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { chromiumPath, expectAccessible, expectNoScriptRan, go, hostile, portalBuilt, prepareScreenshots } from '../helpers/portal-browser.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The portal's browsing pages in a real browser against a real platform: the overview (charts,
 * open circuits, dead letters), the event catalog, event search by each filter, an event, a
 * message's timeline and the audit log. Every page passes axe without serious or critical
 * findings, and hostile event data and message ids stay text.
 */

const exactMembers = '"amount":12345678901234567890.10,"note":"caf\\u00e9"';
/** How the pages indent those members: each on its line, every character as sent. */
const exactShown = ['"amount": 12345678901234567890.10', '"note": "caf\\u00e9"'];

let platform: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;
let browser: Browser;
let page: Page;
let epOk: string;
let epFail: string;
let orderEvent: string;
let hostileEvent: string;
const invoiceEvents: string[] = [];
const problems: string[] = [];

async function linkUrl(body: Record<string, unknown> = { capabilities: ['read', 'manage'] }): Promise<string> {
  const res = await tenant.call('POST', '/v1/portal-sessions', { body });
  expect(res.status, res.text).toBe(201);
  return `${platform.url}/portal/${new URL(res.body.url as string).hash}`;
}

/** A page whose script errors, CSP violations and error answers are collected in `problems`. */
async function openPage(): Promise<Page> {
  const p = await browser.newPage({ viewport: { width: 1024, height: 800 } });
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  p.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && problems.push(`console: ${m.text()}`));
  p.on('response', (r) => r.status() >= 400 && problems.push(`${r.status()} ${r.request().method()} ${r.url()}`));
  return p;
}

const h1 = (p: Page, name: string) => p.getByRole('heading', { level: 1, name }).waitFor();
/** `<input type="datetime-local">` text for a time, in the browser's zone (the test's own). */
const localInput = (ms: number) => {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`;
};

beforeAll(async () => {
  expect(existsSync(portalBuilt), 'portal/dist is built (npm run build:portal)').toBe(true);
  prepareScreenshots();
  // Three failures in a row open a circuit, for long enough to see it open.
  platform = await startTestPlatform({ role: 'all', env: { CIRCUIT_FAILURE_THRESHOLD: '3', CIRCUIT_COOLDOWN_SECONDS: '600' } });
  tenant = await platform.createTenant('Browse');
  receiver = await startReceiver((req, res) => {
    if (req.path === '/fail') res.writeHead(500).end();
    else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  epOk = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/ok` } })).body.id;
  epFail = (
    await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/fail`, eventTypes: ['invoice.*'], retryPolicy: { maxAttempts: 1 } } })
  ).body.id;
  orderEvent = await publish(tenant, { type: 'order.created', messageId: 'order-1', data: { note: hostile } });
  for (let i = 0; i < 3; i++) invoiceEvents.push(await publish(tenant, { type: 'invoice.paid', messageId: 'order-1', data: { amount: 100 + i } }));
  // Written as text: digits beyond double precision and escapes the pages must show as sent.
  const raw = await tenant.call('POST', '/v1/events', {
    rawBody: `{"type":"order.updated","messageId":${JSON.stringify(hostile)},"data":{${JSON.stringify(hostile)}:${JSON.stringify(hostile)},${exactMembers}}}`,
    headers: { 'content-type': 'application/json' },
  });
  expect(raw.status, raw.text).toBe(202);
  hostileEvent = raw.body.id;
  await eventually(async () => {
    const done = await tenant.call('GET', '/v1/deliveries?status=succeeded&limit=100');
    const dead = await tenant.call('GET', '/v1/deliveries?status=dead&limit=100');
    return done.body.data.length === 5 && dead.body.data.length === 3;
  }, 'five deliveries succeeded and three dead-lettered');
  await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${epFail}`)).body.circuit.state === 'open', 'the failing circuit open');
  browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  page = await openPage();
});

afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await platform?.stop();
});

describe('portal browsing pages', () => {
  it('opens on the overview: dead letters, the open circuit, and each endpoint’s last 24 hours as a chart and a table', async () => {
    await page.goto(await linkUrl());
    await h1(page, 'Overview');
    await expect.poll(() => page.locator('[data-figure="dead-letters"] .figure-value').innerText()).toBe('3');
    // Each figure loads on its own: the dead letters' being shown says nothing of this one's.
    await expect.poll(() => page.locator('[data-figure="open-circuits"] .figure-value').innerText()).toBe('1');
    const open = page.locator('section', { has: page.getByRole('heading', { name: 'Endpoints with an open circuit' }) });
    expect(await open.getByRole('link').allInnerTexts()).toEqual([`${receiver.url}/fail`]);

    const failing = page.locator(`[data-endpoint-health="${epFail}"]`);
    await failing.locator('figcaption').waitFor();
    expect(await failing.locator('figcaption').innerText()).toMatch(/^3 attempts, 0% succeeded; latency p50 \d+ ms, p95 \d+ ms\.$/);
    expect(await failing.locator('[data-dead-letters]').innerText()).toContain('3');
    const healthy = page.locator(`[data-endpoint-health="${epOk}"]`);
    await healthy.locator('figcaption').waitFor();
    expect(await healthy.locator('figcaption').innerText()).toMatch(/^5 attempts, 100% succeeded/);
    expect(await healthy.locator('[data-dead-letters]').innerText()).toBe('0');
    // The chart's numbers as a table for assistive technology: one row per hour, the attempts in them.
    const rows = healthy.locator('.sr-only table tbody tr');
    expect(await rows.count()).toBeGreaterThanOrEqual(24);
    const attempts = (await rows.locator('td:nth-child(2)').allInnerTexts()).reduce((n, v) => n + Number(v), 0);
    expect(attempts).toBe(5);
    expect(await healthy.locator('svg[aria-hidden="true"] rect.ok').count()).toBeGreaterThan(0);

    expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link').allInnerTexts()).toContain('Audit log');
    await expectAccessible(page, 'overview');

    await failing.getByRole('link', { name: 'list them' }).click();
    await h1(page, 'Deliveries');
    await expect.poll(() => page.url()).toContain(`endpointId=${epFail}`);
    await expect.poll(() => page.locator('tbody tr').count()).toBe(3);
  });

  it('fits the overview on a 360 px screen in dark mode without scrolling sideways', async () => {
    const small = await openPage();
    await small.setViewportSize({ width: 360, height: 740 });
    await small.emulateMedia({ colorScheme: 'dark' });
    await small.goto(await linkUrl());
    await h1(small, 'Overview');
    await small.locator(`[data-endpoint-health="${epOk}"] figcaption`).waitFor();
    expect(await small.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
    await expectAccessible(small, 'overview-360-dark');
    await small.close();
  });

  it('lists the event types with counts and a recent example whose hostile data stays text', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Event types' }).click();
    await h1(page, 'Event types');
    const cards = page.locator('[data-event-type]');
    await cards.first().waitFor();
    expect(await cards.evaluateAll((els) => els.map((e) => e.getAttribute('data-event-type')))).toEqual(['invoice.paid', 'order.created', 'order.updated']);
    expect(await page.locator('[data-event-type="invoice.paid"] [data-count]').innerText()).toBe('3');
    expect(await page.locator('[data-event-type="invoice.paid"] [data-example]').innerText()).toContain('"amount": 102');
    expect(await page.locator('[data-event-type="order.created"] [data-example]').innerText()).toContain(hostile);
    const example = await page.locator('[data-event-type="order.updated"] [data-example]').innerText();
    expect(example).toContain(`"${hostile}": "${hostile}"`);
    for (const line of exactShown) expect(example).toContain(line);
    await expectNoScriptRan(page);
    await expectAccessible(page, 'event-types');

    await page.getByRole('link', { name: 'All invoice.paid events' }).click();
    await h1(page, 'Events');
    await expect.poll(() => page.locator('tbody tr').count()).toBe(3);
    expect(await page.getByLabel('Event type').inputValue()).toBe('invoice.paid');
  });

  it('searches events by type prefix, message id and time range, and opens one by its id, by keyboard', async () => {
    const rows = page.locator('tbody tr');
    const ids = async () => (await page.locator('tbody tr td:first-child').allInnerTexts()).sort();
    await go(page, '#/events');
    await expect.poll(() => rows.count()).toBe(5);

    await page.getByLabel('Event type').fill('order.*');
    await page.getByLabel('Event type').press('Enter');
    await expect.poll(() => page.url()).toContain('type=order.*');
    await expect.poll(ids).toEqual([orderEvent, hostileEvent].sort());
    // The message id is shown as text in the results, never as markup.
    expect(await page.locator('tbody').getByText(hostile, { exact: true }).count()).toBe(1);
    await expectNoScriptRan(page);

    await page.getByLabel('Event type').fill('');
    await page.getByLabel('Message id').fill('order-1');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(ids).toEqual([orderEvent, ...invoiceEvents].sort());
    await expect.poll(() => page.getByRole('link', { name: 'Timeline of message order-1' }).count()).toBe(1);
    await expectAccessible(page, 'events-search');

    await page.getByLabel('Message id').fill('');
    await page.getByLabel('Received from').fill(localInput(Date.now() + 3_600_000));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No events match.').waitFor();
    await page.getByLabel('Received from').fill(localInput(Date.now() - 3_600_000));
    await page.getByLabel('Received before').fill(localInput(Date.now() + 3_600_000));
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.url()).toContain('until=');
    await expect.poll(() => rows.count()).toBe(5);
    await page.getByLabel('Received before').fill(localInput(Date.now() - 3_600_000));
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('No events match.').waitFor();

    // By keyboard: type an event id and press Enter; its page opens.
    await page.getByLabel('Event id').focus();
    await page.keyboard.type(orderEvent);
    await page.keyboard.press('Enter');
    await h1(page, 'Event');
    await page.locator('[data-event-payload]').waitFor();
    expect(page.url()).toContain(`#/events/${orderEvent}`);
  });

  it('shows an event with its receipts, its deliveries linked to their pages, and its payload as text', async () => {
    await go(page, `#/events/${invoiceEvents[0]}`);
    await page.locator('[data-event-payload]', { hasText: invoiceEvents[0]! }).waitFor();
    expect(await page.locator('[data-receipts]').innerText()).toBe('0');
    const deliveries = page.getByRole('region', { name: 'Deliveries of this event' }).locator('tbody tr');
    expect(await deliveries.count()).toBe(2);
    expect((await deliveries.allInnerTexts()).join('\n')).toMatch(/succeeded[\s\S]*dead \(max_attempts\)|dead \(max_attempts\)[\s\S]*succeeded/);
    await expectAccessible(page, 'event-detail');

    await go(page, `#/events/${hostileEvent}`);
    const payload = page.locator('[data-event-payload]', { hasText: hostileEvent });
    await payload.waitFor();
    expect(await payload.innerText()).toContain(`"${hostile}": "${hostile}"`);
    for (const line of exactShown) expect(await payload.innerText()).toContain(line);
    await expectNoScriptRan(page);
    await page.getByRole('region', { name: 'Deliveries of this event' }).locator('tbody a').first().click();
    await h1(page, 'Delivery');
  });

  it('follows a message from an event to its timeline: every event, its receipts and deliveries', async () => {
    await go(page, `#/events/${orderEvent}`);
    await page.getByRole('link', { name: 'order-1' }).click();
    await h1(page, 'Message');
    const events = page.locator('[data-timeline-event]');
    await expect.poll(() => events.count()).toBe(4);
    expect(await events.evaluateAll((els) => els.map((e) => e.getAttribute('data-timeline-event')))).toEqual([orderEvent, ...invoiceEvents]);
    const invoice = page.locator(`[data-timeline-event="${invoiceEvents[0]}"]`);
    expect(await invoice.innerText()).toMatch(/dead\s+to/);
    expect(await invoice.getByRole('link', { name: epFail }).count()).toBe(1);
    await expectAccessible(page, 'message-timeline');

    // A hostile message id, from the address, is shown as text.
    await go(page, `#/events/${hostileEvent}`);
    await page.locator('[data-event-payload]', { hasText: hostileEvent }).waitFor();
    await page.getByRole('link', { name: hostile }).click();
    await h1(page, 'Message');
    await page.locator(`[data-timeline-event="${hostileEvent}"]`).waitFor();
    expect(await page.locator('dd code').first().innerText()).toBe(hostile);
    await expectNoScriptRan(page);
  });

  it('shows the audit log of what the link can see, filtered by keyboard, each entry linked to its target', async () => {
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Audit log' }).click();
    await h1(page, 'Audit log');
    const rows = page.locator('tbody tr');
    await expect.poll(async () => (await rows.evaluateAll((els) => els.map((e) => e.getAttribute('data-audit-action')))).sort()).toEqual(['endpoint.created', 'endpoint.created']);
    // The links this test created are audited too, but they are not a link's business.
    expect(await page.getByText('portal_session.created').count()).toBe(0);
    await page.getByLabel('Target type').selectOption('endpoint');
    await page.getByLabel('Action').fill('endpoint.created');
    await page.getByLabel('Action').press('Enter');
    await expect.poll(() => page.url()).toContain('targetType=endpoint');
    await expect.poll(() => rows.count()).toBe(2);
    await expectAccessible(page, 'audit');
    await rows.getByRole('link', { name: epOk }).click();
    await h1(page, 'Endpoint');
    await expect.poll(() => page.url()).toContain(`#/endpoints/${epOk}`);
  });

  it('shows a link limited to some endpoints only what goes to them', async () => {
    const narrow = await openPage();
    await narrow.goto(await linkUrl({ endpointIds: [epFail] }));
    await h1(narrow, 'Overview');
    await narrow.locator(`[data-endpoint-health="${epFail}"] figcaption`).waitFor();
    expect(await narrow.locator('[data-endpoint-health]').count()).toBe(1);
    // The figures load apart from the health cards, so wait for the count rather than its placeholder.
    await expect.poll(() => narrow.locator('[data-figure="dead-letters"] .figure-value').innerText()).toBe('3');
    await go(narrow, '#/event-types');
    await narrow.locator('[data-event-type]').first().waitFor();
    expect(await narrow.locator('[data-event-type]').evaluateAll((els) => els.map((e) => e.getAttribute('data-event-type')))).toEqual(['invoice.paid']);
    await go(narrow, '#/audit');
    await h1(narrow, 'Audit log');
    await narrow.locator('tbody tr').first().waitFor();
    expect(await narrow.locator('tbody tr').allInnerTexts()).toEqual([expect.stringContaining(epFail)]);
    await narrow.close();
  });

  it('ran without script errors, CSP violations or error answers', () => {
    expect(problems).toEqual([]);
  });
});
