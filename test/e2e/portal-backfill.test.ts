import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { chromiumPath, expectAccessible, go, portalBuilt, prepareScreenshots } from '../helpers/portal-browser.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';

/**
 * The portal's Backfill action in a real browser: events published before an endpoint existed
 * reach it after a dry run and a confirmation; a read-only link is not offered the action.
 */
describe('portal backfill', () => {
  let platform: TestPlatform;
  let tenant: TestTenant;
  let receiver: Receiver;
  let browser: Browser;
  let page: Page;
  let endpointId: string;
  const events: string[] = [];
  const problems: string[] = [];

  const link = async (capabilities: string[]) => {
    const res = await tenant.call('POST', '/v1/portal-sessions', { body: { capabilities } });
    expect(res.status, res.text).toBe(201);
    return `${platform.url}/portal/${new URL(res.body.url as string).hash}`;
  };
  const openEndpoint = async (capabilities: string[]) => {
    await page.goto(await link(capabilities));
    await page.getByRole('navigation').locator('a[aria-current="page"]', { hasText: 'Overview' }).waitFor();
    await go(page, `#/endpoints/${endpointId}`);
    await page.locator('[data-endpoint-url]').waitFor();
  };

  beforeAll(async () => {
    expect(existsSync(portalBuilt), 'portal/dist is built (npm run build:portal)').toBe(true);
    prepareScreenshots();
    platform = await startTestPlatform({ role: 'all', env: { REPLAY_RATE_PER_SECOND: '100' } });
    tenant = await platform.createTenant('Backfill');
    receiver = await startReceiver();
    events.push(await publish(tenant, 'order.created', { n: 1 }), await publish(tenant, 'order.created', { n: 2 }));
    endpointId = (await createEndpoint(tenant, { url: `${receiver.url}/hooks` })).id;
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1024, height: 800 } });
    page.setDefaultTimeout(15_000);
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('response', (r) => r.status() >= 400 && !r.url().endsWith('/exchange') && problems.push(`${r.status()} ${r.request().method()} ${r.url()}`));
  });
  afterAll(async () => {
    await browser?.close();
    await receiver?.close();
    await platform?.stop();
  });

  it('previews, then backfills with a reason, and follows the progress to completion', async () => {
    await openEndpoint(['read', 'manage']);
    const section = page.getByRole('region', { name: 'Backfill' });
    await section.getByRole('button', { name: 'Preview backfill (dry run)' }).click();
    await section.locator('[data-backfill-count]', { hasText: '2 events would be delivered. Nothing has been sent yet.' }).waitFor();
    expect(await section.getByRole('list', { name: 'The oldest events it would deliver' }).getByRole('listitem').count()).toBe(2);
    await expectAccessible(page, 'endpoint-backfill-preview');
    expect(receiver.requests).toHaveLength(0);

    await section.getByLabel('Reason (kept in the audit log)').fill('new endpoint needs last week');
    await section.getByRole('button', { name: 'Backfill 2 events' }).click();
    await page.locator('[data-replay-status]', { hasText: 'Completed: 2 delivered, 0 failed, of 2' }).waitFor();
    await eventually(async () => receiver.eventIds().size === 2, 'both events at the receiver');
    expect([...receiver.eventIds()].sort()).toEqual([...events].sort());
    expect(problems).toEqual([]);
  });

  it('is not offered to a read-only link', async () => {
    // A new page: the portal keeps its session for the life of the page, whatever the address says.
    await page.close();
    page = await browser.newPage({ viewport: { width: 1024, height: 800 } });
    await openEndpoint(['read']);
    await page.getByText('Settings and signing secret').waitFor();
    expect(await page.getByRole('region', { name: 'Backfill' }).count()).toBe(0);
  });
});
