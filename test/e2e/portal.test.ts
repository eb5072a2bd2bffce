import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyStandardWebhook } from '../../src/domain/signing.js';
import { publish } from '../helpers/api.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { chromiumPath, expectAccessible, expectNoScriptRan, go, hostile, portalBuilt, prepareScreenshots, screenshotDir } from '../helpers/portal-browser.js';
import { ok, startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The tenant portal in a real browser against a real platform and a real receiver, as a tenant's
 * customer uses it: a link opens a session; an endpoint is created, tuned and sent a test event;
 * the receiver fails until the delivery is dead; a dry run and a bulk replay bring it back; the
 * secret is rotated and the receiver verifies the new signature; read-only and narrowed links
 * see only what they should. Every page passes axe without serious or critical findings, hostile
 * text stays text, and each page is photographed into test-results/portal/.
 */


let platform: TestPlatform;
let tenant: TestTenant;
let receiver: Receiver;
let browser: Browser;
let page: Page;
const problems: string[] = [];

/** The endpoint the scenario builds up, and what it learns along the way. */
const hooks = { id: '', url: '', createdSecret: '', testDeliveryId: '', deadDeliveryId: '' };

async function createLink(body: Record<string, unknown> = { capabilities: ['read', 'manage'] }): Promise<{ id: string; url: string }> {
  const res = await tenant.call('POST', '/v1/portal-sessions', { body });
  expect(res.status, res.text).toBe(201);
  const hash = new URL(res.body.url as string).hash;
  expect(hash).toMatch(/^#token=/);
  return { id: res.body.id as string, url: `${platform.url}/portal/${hash}` };
}

const linkUrl = async (body?: Record<string, unknown>) => (await createLink(body)).url;

/**
 * A page whose script errors, CSP violations and unexpected error answers are collected in
 * `problems`. `sessionEnds`: 401s are expected; `notFound`: 404s are (a link's scope is probed).
 */
async function openPage(opts: { sessionEnds?: boolean; notFound?: boolean } = {}): Promise<Page> {
  const p = await browser.newPage({ viewport: { width: 1024, height: 800 }, permissions: ['clipboard-read', 'clipboard-write'] });
  // A wait that never ends fails at its own line, well before the test's timeout.
  p.setDefaultTimeout(15_000);
  p.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Answers the page expects (401 for a used link) are logged as failed loads; those are not problems.
  p.on('console', (m) => m.type() === 'error' && !m.text().startsWith('Failed to load resource') && problems.push(`console: ${m.text()}`));
  p.on('response', (r) => {
    const expected =
      (r.status() === 401 && (opts.sessionEnds || r.url().endsWith('/v1/portal-sessions/exchange'))) || (r.status() === 404 && opts.notFound === true);
    if (r.status() >= 400 && !expected) problems.push(`${r.status()} ${r.request().method()} ${r.url()}`);
  });
  return p;
}

/** Opens a link and waits for the portal to land on its Overview. */
async function openLink(p: Page, url: string): Promise<void> {
  await p.goto(url);
  await p.getByRole('navigation').locator('a[aria-current="page"]', { hasText: 'Overview' }).waitFor();
}

async function openEndpointPage(p: Page, id: string): Promise<void> {
  await go(p, `#/endpoints/${id}`);
  await p.getByRole('heading', { level: 1, name: 'Endpoint' }).waitFor();
  await p.locator('[data-endpoint-url]').waitFor();
}

/** The receiver's requests for one event (webhook-id), in arrival order. */
const requestsFor = (eventId: string) => receiver.requests.filter((r) => r.headers['webhook-id'] === eventId);

beforeAll(async () => {
  expect(existsSync(portalBuilt), 'portal/dist is built (npm run build:portal)').toBe(true);
  prepareScreenshots();
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
  it('opens from a link on the overview, and the link leaves the address bar at once', async () => {
    await openLink(page, await linkUrl());
    expect(page.url()).not.toContain('token');
    expect(await page.evaluate('[localStorage.length, sessionStorage.length, document.cookie]')).toEqual([0, 0, '']);
    // A link that may manage the whole tenant carries no restriction to show.
    expect(await page.locator('header [data-scope]').count()).toBe(0);
    await page.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await expectAccessible(page, 'endpoints-empty');
  });

  it('creates an endpoint whose hostile description renders as text', async () => {
    hooks.url = `${receiver.url}/hooks`;
    await page.getByLabel('URL').fill(hooks.url);
    await page.getByLabel('Event types', { exact: true }).fill('order.created, portal.test');
    await page.getByLabel('Description (optional)').fill(hostile);
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const created = page.getByText('Endpoint created.');
    await created.waitFor();
    hooks.createdSecret = /whsec_[A-Za-z0-9+/=]+/.exec(await created.innerText())![0];
    const card = page.locator('li.card', { hasText: hooks.url });
    await card.waitFor();
    expect(await card.getByText(hostile, { exact: true }).count()).toBe(1);
    await expectNoScriptRan(page);
    hooks.id = (await card.locator('code').innerText()).trim();
    expect(hooks.id).toMatch(/^ep_/);
    await expectAccessible(page, 'endpoints-created');
  });

  it('sends a test event and follows its delivery until it succeeds, with its attempt', async () => {
    const card = page.locator('li.card', { hasText: hooks.url });
    await card.getByRole('button', { name: 'Send test event' }).click();
    await card.locator('[data-delivery-status]', { hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    expect(receiver.requests.length).toBe(1);
    await page.screenshot({ path: `${screenshotDir}/endpoints-test-sent.png`, fullPage: true });

    await card.getByRole('link', { name: 'details' }).click();
    await page.getByRole('heading', { level: 1, name: 'Delivery' }).waitFor();
    hooks.testDeliveryId = /#\/deliveries\/([^?]+)/.exec(page.url())![1]!;
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
    await go(page, `#/deliveries/${deliveryId}`);
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
    await page.getByLabel('Endpoint').selectOption({ label: hooks.url });
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

  it("edits the endpoint on its own page: retries, rate limit, concurrency, ordering and event types", async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await page.locator('li.card', { hasText: hooks.url }).getByRole('link', { name: hooks.url }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoint' }).waitFor();
    expect(page.url()).toContain(`#/endpoints/${hooks.id}`);
    await page.locator('[data-endpoint-stats]').waitFor();
    await expectAccessible(page, 'endpoint-detail');

    await page.getByLabel('Max attempts').fill('2');
    await page.getByLabel('First retry after (ms)').fill('200');
    await page.getByLabel('Rate limit per second').fill('50');
    await page.getByLabel('Concurrency').fill('4');
    await page.getByLabel('Ordering').selectOption('per-message');
    await page.getByLabel('Event types', { exact: true }).fill('order.*, portal.test');
    await page.getByLabel('Description').fill('Orders for the warehouse');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved.').waitFor();
    await page.locator('[data-retry-policy]', { hasText: 'up to 2 attempts, first retry after 200 ms' }).waitFor();
    const saved = (await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body;
    expect(saved).toMatchObject({
      retryPolicy: { maxAttempts: 2, baseDelayMs: 200 },
      rateLimitPerSecond: 50,
      maxConcurrency: 4,
      ordering: 'per-message',
      eventTypes: ['order.*', 'portal.test'],
      description: 'Orders for the warehouse',
    });

    // Back to no ordering and no rate limit: an emptied field clears its value.
    await page.getByLabel('Ordering').selectOption('none');
    await page.getByLabel('Rate limit per second').fill('');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await expect.poll(async () => (await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body).toMatchObject({ ordering: 'none', rateLimitPerSecond: null, retryPolicy: { maxAttempts: 2 } });
  });

  it('disables and enables the endpoint, the disabling after a confirmation', async () => {
    await page.getByRole('button', { name: 'Disable…' }).click();
    await page.getByRole('heading', { name: 'Disable this endpoint?' }).waitFor();
    await page.getByRole('button', { name: 'Disable endpoint' }).click();
    await page.locator('[data-endpoint-status]', { hasText: 'disabled' }).waitFor();
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body.status).toBe('disabled');
    await page.getByRole('button', { name: 'Enable endpoint' }).click();
    await page.locator('[data-endpoint-status]', { hasText: 'active' }).waitFor();
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body.status).toBe('active');
  });

  it("shows the endpoint's content filter digit for digit and its header names, never their values", async () => {
    const bodyText = `{"filter":{"data.amount":{"$gte":12345678901234567890123}},"headers":{"X-Team":"payments-secret-value"}}`;
    const res = await tenant.call('PATCH', `/v1/endpoints/${hooks.id}`, { rawBody: bodyText, headers: { 'content-type': 'application/json' } });
    expect(res.status, res.text).toBe(200);
    // Changed behind the page's back: leave the page and come back, so it loads again.
    await go(page, '#/endpoints');
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await openEndpointPage(page, hooks.id);
    await page.locator('[data-endpoint-filter]', { hasText: '12345678901234567890123' }).waitFor();
    const headers = await page.locator('[data-endpoint-headers]').innerText();
    expect(headers).toContain('X-Team');
    expect(await page.content()).not.toContain('payments-secret-value');
    const cleared = await tenant.call('PATCH', `/v1/endpoints/${hooks.id}`, { body: { filter: null, headers: null } });
    expect(cleared.status, cleared.text).toBe(200);
  });

  it('pauses and resumes the endpoint', async () => {
    await page.getByRole('button', { name: 'Pause endpoint' }).click();
    await page.locator('[data-endpoint-status]', { hasText: 'paused' }).waitFor();
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body.status).toBe('paused');
    await page.getByRole('button', { name: 'Resume endpoint' }).click();
    await page.locator('[data-endpoint-status]', { hasText: 'active' }).waitFor();
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).body.status).toBe('active');
    const actions = (await tenant.call('GET', `/v1/audit-log?targetId=${hooks.id}`)).body.data.map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['endpoint.paused', 'endpoint.resumed']));
  });

  it('a failing receiver: the test delivery is retried, then dead, and its hostile answer renders as text', async () => {
    receiver.setResponder((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/html' }).end(hostile);
    });
    const before = receiver.requests.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    const status = page.locator('.test-status [data-delivery-status]');
    await status.filter({ hasText: 'dead' }).waitFor({ timeout: 20_000 });
    expect(receiver.requests.length - before).toBe(2);

    await page.locator('.test-status').getByRole('link', { name: 'details' }).click();
    await page.getByRole('heading', { level: 1, name: 'Delivery' }).waitFor();
    hooks.deadDeliveryId = /#\/deliveries\/([^?]+)/.exec(page.url())![1]!;
    await page.locator('[data-dead-reason]', { hasText: 'Ran out of attempts' }).waitFor();
    const attempts = page.locator('ol.attempts > li');
    await expect.poll(() => attempts.count()).toBe(2);
    await attempts.nth(1).getByRole('heading', { name: 'Attempt 2: terminal' }).waitFor();
    expect(await attempts.nth(1).innerText()).toContain('500');
    expect(await attempts.nth(1).locator('pre.excerpt').innerText()).toBe(hostile);
    await expectNoScriptRan(page);
    await expectAccessible(page, 'delivery-dead');
  });

  it('filters deliveries by dead-letter reason and time, kept in the address', async () => {
    await page.getByRole('navigation').getByRole('link', { name: 'Deliveries' }).click();
    await page.getByRole('heading', { level: 1, name: 'Deliveries' }).waitFor();
    const rows = page.locator('tbody tr');
    await page.getByLabel('Dead-letter reason').selectOption({ label: 'Ran out of attempts' });
    await expect.poll(() => page.url()).toContain('reason=max_attempts');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().innerText()).toContain(hooks.deadDeliveryId);
    await page.getByLabel('Dead-letter reason').selectOption({ label: 'Refused by the receiver' });
    await page.getByText('No deliveries match.').waitFor();
    await page.getByLabel('Dead-letter reason').selectOption({ label: 'Any reason' });
    // The test delivery, the order published above and the dead one.
    await expect.poll(() => rows.count()).toBe(3);

    await page.getByLabel('Created from').fill('2099-01-01T00:00');
    await expect.poll(() => page.url()).toContain('since=2099-');
    await page.getByText('No deliveries match.').waitFor();
    await page.getByLabel('Created from').fill('2000-01-01T00:00');
    await expect.poll(() => rows.count()).toBe(3);
    await page.getByLabel('Created before').fill('2000-01-02T00:00');
    await expect.poll(() => page.url()).toContain('until=2000-');
    await page.getByText('No deliveries match.').waitFor();
    // The address carries the filters: reloading it shows the same selection.
    const url = page.url();
    await page.getByLabel('Created before').fill('');
    await expect.poll(() => rows.count()).toBe(3);
    await go(page, new URL(url).hash);
    await page.getByText('No deliveries match.').waitFor();
    expect(await page.getByLabel('Created before').inputValue()).toBe('2000-01-02T00:00');
    await expectAccessible(page, 'deliveries-filtered');
  });

  it('bulk-replays the dead delivery: a dry run first, then a confirmation with a reason, then live progress', async () => {
    receiver.setResponder(ok);
    await openEndpointPage(page, hooks.id);
    await page.locator('[data-endpoint-stats]').waitFor();
    // The pictures in docs/ (the README's "Tenant portal"): the visible part of the page only.
    await page.screenshot({ path: `${screenshotDir}/docs-portal-endpoint.png` });
    await page.getByRole('link', { name: 'Replay its dead deliveries' }).click();
    await page.getByRole('heading', { level: 1, name: 'Replay deliveries' }).waitFor();
    expect(await page.getByLabel('Status').inputValue()).toBe('dead');
    expect(await page.getByLabel('Endpoint').inputValue()).toBe(hooks.id);

    const sent = receiver.requests.length;
    await page.getByRole('button', { name: 'Preview (dry run)' }).click();
    await page.locator('[data-replay-count]', { hasText: '1 delivery would be replayed. Nothing has been sent yet.' }).waitFor();
    const sample = page.getByRole('region', { name: 'The first deliveries it would replay' });
    expect(await sample.locator('tbody tr').count()).toBe(1);
    expect(await sample.innerText()).toContain(hooks.deadDeliveryId);
    await page.screenshot({ path: `${screenshotDir}/docs-portal-replay-preview.png` });
    await expectAccessible(page, 'replays-preview');
    expect(receiver.requests.length).toBe(sent);

    // A filter that matches nothing says so and offers nothing to confirm.
    await page.getByLabel('Dead-letter reason').selectOption({ label: 'Refused by the receiver' });
    expect(await page.locator('[data-replay-count]').count()).toBe(0);
    await page.getByRole('button', { name: 'Preview (dry run)' }).click();
    await page.locator('[data-replay-count]', { hasText: 'No delivery matches' }).waitFor();
    expect(await page.getByRole('button', { name: /^Replay \d/ }).count()).toBe(0);
    await page.getByLabel('Dead-letter reason').selectOption({ label: 'Any reason' });
    await page.getByRole('button', { name: 'Preview (dry run)' }).click();

    // The reason is required: the browser will not submit without one.
    const confirm = page.getByRole('button', { name: 'Replay 1 delivery' });
    await confirm.click();
    expect(await page.locator('#replay-reason:invalid').count()).toBe(1);
    expect(page.url()).toContain('#/replays?');
    await page.getByLabel('Reason (kept in the audit log)').fill('receiver fixed');
    await confirm.click();

    await page.getByRole('heading', { level: 1, name: 'Replay' }).waitFor();
    await page.locator('[data-replay-status]', { hasText: 'Completed: 1 delivered, 0 failed, of 1' }).waitFor({ timeout: 15_000 });
    const replayId = /#\/replays\/([^?]+)/.exec(page.url())![1]!;
    await expectAccessible(page, 'replay-progress');
    const replayed = receiver.requests.slice(sent);
    expect(replayed).toHaveLength(1);
    expect(replayed[0]!.headers['webhook-replay']).toBe('true');
    expect((await tenant.call('GET', `/v1/deliveries/${hooks.deadDeliveryId}`)).body.status).toBe('succeeded');
    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${replayId}`);
    expect(audit.body.data[0]).toMatchObject({ action: 'replay.started', actor: { type: 'portal_session' }, reason: 'receiver fixed' });
  });

  it('replays one delivery from its page after asking why, and shows the new attempt as it arrives', async () => {
    await go(page, `#/deliveries/${hooks.testDeliveryId}`);
    await page.getByRole('heading', { level: 1, name: 'Delivery' }).waitFor();
    const attempts = page.locator('ol.attempts > li');
    await expect.poll(() => attempts.count()).toBe(1);
    await page.getByRole('button', { name: 'Replay…' }).click();
    await page.getByRole('heading', { name: 'Replay this delivery?' }).waitFor();
    await page.getByLabel('Reason (kept in the audit log)').fill('customer asked');
    await page.getByRole('button', { name: 'Replay delivery' }).click();
    await attempts.nth(1).getByRole('heading', { name: 'Attempt 2: success (replay)' }).waitFor({ timeout: 15_000 });
    expect(await attempts.nth(1).innerText()).toContain('replay');
    await page.locator('[data-delivery-status]', { hasText: 'succeeded' }).waitFor();
    await expectAccessible(page, 'delivery-replayed');
    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${hooks.testDeliveryId}`);
    expect(audit.body.data[0]).toMatchObject({ action: 'delivery.replayed', reason: 'customer asked' });
  });

  it('shows and rotates the secret after confirmations, and the receiver verifies the new signature', async () => {
    await openEndpointPage(page, hooks.id);
    await page.getByRole('button', { name: 'Show secret…' }).click();
    await page.getByRole('heading', { name: 'Show the signing secret?' }).waitFor();
    expect(await page.locator('[data-secret]').count()).toBe(0);
    await page.getByRole('button', { name: 'Show secret', exact: true }).click();
    const secret = page.locator('[data-secret]');
    await secret.waitFor();
    expect(await secret.innerText()).toBe(hooks.createdSecret);
    await page.getByRole('button', { name: 'Copy secret' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(hooks.createdSecret);
    await page.getByRole('button', { name: 'Hide secret' }).click();
    expect(await secret.count()).toBe(0);

    await page.getByRole('button', { name: 'Rotate secret…' }).click();
    await page.getByRole('heading', { name: 'Rotate the signing secret?' }).waitFor();
    await page.getByRole('button', { name: 'Rotate secret', exact: true }).click();
    await page.getByText('The new signing secret:').waitFor();
    const rotated = await secret.innerText();
    expect(rotated).toMatch(/^whsec_/);
    expect(rotated).not.toBe(hooks.createdSecret);
    await page.locator('[data-previous-secret]').waitFor();
    await expectAccessible(page, 'endpoint-secret-rotated');

    const before = receiver.requests.length;
    await page.getByRole('button', { name: 'Send test event' }).click();
    await page.locator('.test-status [data-delivery-status]', { hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    const request = receiver.requests.slice(before).at(-1)!;
    const [id, timestamp, header] = [String(request.headers['webhook-id']), Number(request.headers['webhook-timestamp']), String(request.headers['webhook-signature'])];
    expect(verifyStandardWebhook(rotated, id, timestamp, request.body, header)).toBe(true);
    // During the overlap the previous secret signs too; a wrong one verifies nothing.
    expect(header.split(' ')).toHaveLength(2);
    expect(verifyStandardWebhook(hooks.createdSecret, id, timestamp, request.body, header)).toBe(true);
    expect(verifyStandardWebhook(`whsec_${Buffer.alloc(24, 7).toString('base64')}`, id, timestamp, request.body, header)).toBe(false);

    const audit = await tenant.call('GET', `/v1/audit-log?targetId=${hooks.id}`);
    const actions = (audit.body.data as Array<{ action: string }>).map((e) => e.action);
    expect(actions.slice(0, 2)).toEqual(['endpoint.secret_rotated', 'endpoint.secret_revealed']);
    expect(JSON.stringify(audit.body)).not.toContain(rotated.slice('whsec_'.length));
  });

  it('a read-only link sees the same pages without any control that would change something', async () => {
    const p = await openPage();
    await openLink(p, await linkUrl({ capabilities: ['read'] }));
    expect(await p.locator('header [data-scope]').allInnerTexts()).toEqual(['Read-only']);
    await p.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await p.locator('li.card', { hasText: hooks.url }).waitFor();
    expect(await p.getByRole('button').count()).toBe(0);
    expect(await p.getByLabel('URL').count()).toBe(0);
    await p.getByText('This link is read-only: adding or changing an endpoint needs a link that can manage.').waitFor();
    await expectAccessible(p, 'readonly-endpoints');

    await openEndpointPage(p, hooks.id);
    await p.locator('[data-endpoint-stats]').waitFor();
    expect(await p.getByRole('button').count()).toBe(0);
    expect(await p.getByRole('link', { name: 'Replay its dead deliveries' }).count()).toBe(0);
    expect(await p.locator('[data-read-only]').count()).toBe(2);
    await expectAccessible(p, 'readonly-endpoint');

    await go(p, `#/deliveries/${hooks.deadDeliveryId}`);
    await p.locator('[data-delivery-status]').waitFor();
    expect(await p.getByRole('button').count()).toBe(0);
    await p.getByText('This link is read-only: replaying a delivery needs a link that can manage.').waitFor();

    await p.getByRole('navigation').getByRole('link', { name: 'Replays' }).click();
    await p.getByRole('heading', { level: 1, name: 'Replay deliveries' }).waitFor();
    expect(await p.getByRole('button').count()).toBe(0);
    await p.getByText('This link is read-only: replaying deliveries needs a link that can manage.').waitFor();
    await expectAccessible(p, 'readonly-replays');
    await p.close();
  });

  it('an endpoint-scoped link lists only its endpoints and their deliveries, and anything else is not found', async () => {
    const other1 = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/scoped-one`, eventTypes: ['invoice.*'] } })).body.id as string;
    const other2 = (await tenant.call('POST', '/v1/endpoints', { body: { url: `${receiver.url}/scoped-two`, eventTypes: ['invoice.*'] } })).body.id as string;
    const invoice = await publish(tenant, { type: 'invoice.paid', data: {} });
    await eventually(async () => {
      const res = await tenant.call('GET', `/v1/deliveries?eventId=${invoice}&status=succeeded`);
      return res.body.data.length === 2;
    }, 'the invoice delivered to both scoped endpoints');

    const p = await openPage({ notFound: true });
    await openLink(p, await linkUrl({ capabilities: ['read', 'manage'], endpointIds: [other1, other2] }));
    expect(await p.locator('header [data-scope]').allInnerTexts()).toEqual(['2 endpoints']);
    await p.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    const cards = p.locator('li.card');
    await expect.poll(() => cards.count()).toBe(2);
    expect(await p.locator('li.card', { hasText: hooks.url }).count()).toBe(0);
    // Creating an endpoint would make one outside the link's scope.
    expect(await p.getByRole('button', { name: 'Add endpoint' }).count()).toBe(0);
    await p.getByText('This link is limited to some endpoints or event types, so it cannot add endpoints.').waitFor();
    await expectAccessible(p, 'scoped-endpoints');

    await p.getByRole('navigation').getByRole('link', { name: 'Deliveries' }).click();
    const rows = p.locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    const listed = await p.locator('tbody').innerText();
    for (const id of [hooks.testDeliveryId, hooks.deadDeliveryId]) expect(listed).not.toContain(id);
    expect((await p.getByLabel('Endpoint').locator('option').allInnerTexts()).sort()).toEqual(['All endpoints', `${receiver.url}/scoped-one`, `${receiver.url}/scoped-two`]);

    await go(p, `#/endpoints/${hooks.id}`);
    await p.locator('[data-not-found]').waitFor();
    expect(await p.locator('[data-not-found]').innerText()).toContain('There is no endpoint with this id that this link can see.');
    expect(await p.getByRole('button').count()).toBe(0);
    await expectAccessible(p, 'scoped-endpoint-not-found');
    await go(p, `#/deliveries/${hooks.deadDeliveryId}`);
    await p.locator('[data-not-found]', { hasText: 'no delivery' }).waitFor();

    // A bulk replay from here can only take its own deliveries, whatever the filter says.
    await p.getByRole('navigation').getByRole('link', { name: 'Replays' }).click();
    await p.getByLabel('Status').selectOption('succeeded');
    await p.getByRole('button', { name: 'Preview (dry run)' }).click();
    await p.locator('[data-replay-count]', { hasText: '2 deliveries would be replayed' }).waitFor();
    await p.close();
  });

  it('a link limited to event types sends its test event as one of them', async () => {
    const p = await openPage();
    await openLink(p, await linkUrl({ capabilities: ['read', 'manage'], eventTypes: ['order.*'] }));
    expect(await p.locator('header [data-scope]').allInnerTexts()).toEqual(['Event types: order.*']);
    await p.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    const card = p.locator('li.card', { hasText: hooks.url });
    await card.waitFor();
    await card.getByText('This link covers only order.*, so the test event must be one of these types (not platform.test).').waitFor();
    const type = card.getByLabel('Test event type');
    expect(await type.inputValue()).toBe('');
    await type.fill('order.test');
    await card.getByRole('button', { name: 'Send test event' }).click();
    await card.locator('[data-delivery-status]', { hasText: 'succeeded' }).waitFor({ timeout: 15_000 });
    await expectAccessible(p, 'event-type-scoped-endpoints');
    await p.close();
  });

  it('fits a 360 px screen and a dark colour scheme', async () => {
    await page.setViewportSize({ width: 360, height: 740 });
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
    await expectAccessible(page, 'endpoints-360-dark');
    await openEndpointPage(page, hooks.id);
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(360);
    await expectAccessible(page, 'endpoint-360-dark');
    await page.setViewportSize({ width: 1024, height: 800 });
    await page.emulateMedia({ colorScheme: 'light' });
  });

  it('says plainly when a link was used already, is not valid or is missing', async () => {
    const url = await linkUrl();
    const first = await openPage();
    await openLink(first, url);
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

  it('says plainly when a link has expired or was revoked before it was opened', async () => {
    const expired = await createLink();
    // Its hour is up: moved into the past in the database rather than waited for.
    await platform.platform.db('portal_sessions').where({ id: expired.id }).update({ expires_at: new Date(Date.now() - 1000) });
    const late = await openPage();
    await late.goto(expired.url);
    await late.getByRole('heading', { level: 1, name: 'This link has expired' }).waitFor();
    await late.getByText('Ask for a new link.').first().waitFor();
    await expectAccessible(late, 'link-expired');
    await late.close();

    const withdrawn = await createLink();
    expect((await tenant.call('DELETE', `/v1/portal-sessions/${withdrawn.id}`)).status).toBe(204);
    const refused = await openPage();
    await refused.goto(withdrawn.url);
    await refused.getByRole('heading', { level: 1, name: 'This session was ended' }).waitFor();
    await refused.getByText('This portal link has been revoked').waitFor();
    await refused.close();
  });

  it('ends the page when its session is revoked', async () => {
    const link = await createLink();
    const p = await openPage({ sessionEnds: true });
    await openLink(p, link.url);
    // Settled on a page first: the overview's own requests would otherwise be the ones to find out.
    await p.getByRole('navigation').getByRole('link', { name: 'Deliveries' }).click();
    await p.locator('tbody tr').first().waitFor();
    expect((await tenant.call('DELETE', `/v1/portal-sessions/${link.id}`)).status).toBe(204);
    await p.getByRole('navigation').getByRole('link', { name: 'Endpoints' }).click();
    await p.getByRole('heading', { level: 1, name: 'This session was ended' }).waitFor();
    await expectAccessible(p, 'session-revoked');
    await p.close();
  });

  it('deletes the endpoint after a confirmation', async () => {
    await openEndpointPage(page, hooks.id);
    // Two confirmations open at once, each named by its own question.
    await page.getByRole('button', { name: 'Disable…' }).click();
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('group', { name: 'Disable this endpoint?' }).waitFor();
    await page.getByRole('group', { name: 'Delete this endpoint?' }).waitFor();
    await expectAccessible(page, 'endpoint-confirmations');
    await page.getByRole('group', { name: 'Disable this endpoint?' }).getByRole('button', { name: 'Cancel' }).click();
    await page.getByRole('group', { name: 'Delete this endpoint?' }).getByRole('button', { name: 'Cancel' }).click();
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).status).toBe(200);
    await page.getByRole('button', { name: 'Delete…' }).click();
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await expect.poll(() => page.locator('li.card').count()).toBe(2);
    expect(await page.locator('li.card', { hasText: hooks.url }).count()).toBe(0);
    expect((await tenant.call('GET', `/v1/endpoints/${hooks.id}`)).status).toBe(404);
  });

  it('ran without script errors or CSP violations', () => {
    expect(problems).toEqual([]);
  });
});
