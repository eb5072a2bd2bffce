import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uuidOf } from '../../src/domain/ids.js';
import { createEndpoint, publish } from '../helpers/dispatch.js';
import { eventually, startTestPlatform, type TestPlatform, type TestTenant } from '../helpers/platform.js';
import { chromiumPath, expectAccessible, portalBuilt, prepareScreenshots } from '../helpers/portal-browser.js';
import { startReceiver, type Receiver } from '../helpers/receiver.js';
import { answer } from '../helpers/replay.js';

/**
 * The portal's overview names the endpoints the platform has warned about (platform.endpoint.failing)
 * and when it will disable them, in a real browser against a real platform and a failing receiver.
 */
describe('portal overview: failure warnings', () => {
  let platform: TestPlatform;
  let tenant: TestTenant;
  let failing: Receiver;
  let healthy: Receiver;
  let browser: Browser;

  beforeAll(async () => {
    expect(existsSync(portalBuilt), 'portal/dist is built (npm run build:portal)').toBe(true);
    prepareScreenshots();
    platform = await startTestPlatform({ env: { AUTO_DISABLE_AFTER_SECONDS: '600', SWEEP_INTERVAL_MS: '100', CIRCUIT_FAILURE_THRESHOLD: '1000' } });
    tenant = await platform.createTenant('Warned');
    failing = await startReceiver(answer(503));
    healthy = await startReceiver(answer(200));
    browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  });
  afterAll(async () => {
    await browser?.close();
    await failing?.close();
    await healthy?.close();
    await platform?.stop();
  });

  it('lists a warned endpoint with its streak and the time it will be disabled, and no healthy one', async () => {
    const ep = (await createEndpoint(tenant, { url: `${failing.url}/down`, retryPolicy: { maxAttempts: 100 } })).id;
    await createEndpoint(tenant, { url: `${healthy.url}/up` });
    await publish(tenant, 'order.created');
    // Half of a 600 s window is a long wait: the streak is moved back to 5 minutes ago instead,
    // after a real failure started it, and the next sweep warns.
    await eventually(async () => (await tenant.call('GET', `/v1/endpoints/${ep}`)).body.health.failingSince, 'the streak started');
    await platform.platform.db('endpoints').where({ id: uuidOf('endpoint', ep) }).update({ failing_since: platform.platform.db.raw("now() - interval '301 seconds'") });
    const health = await eventually(async () => {
      const h = (await tenant.call('GET', `/v1/endpoints/${ep}`)).body.health;
      return h.warnedThreshold === 0.5 && h;
    }, 'the 50 % warning');

    const res = await tenant.call('POST', '/v1/portal-sessions', { body: { capabilities: ['read'] } });
    expect(res.status, res.text).toBe(201);
    const page = await browser.newPage({ viewport: { width: 1024, height: 800 } });
    await page.goto(`${platform.url}/portal/${new URL(res.body.url as string).hash}`);
    await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor();
    await expect.poll(() => page.locator('[data-figure="failing-endpoints"] .figure-value').innerText()).toBe('1');
    const section = page.locator('section', { has: page.getByRole('heading', { name: 'Endpoints failing towards an automatic disable' }) });
    expect(await section.getByRole('link').allInnerTexts()).toEqual([`${failing.url}/down`]);
    const text = await section.locator(`[data-failing-endpoint="${ep}"]`).innerText();
    expect(text).toContain('past 50 % of the time allowed');
    const shown = await page.evaluate(([since, at]) => [new Date(since!).toLocaleString(), new Date(at!).toLocaleString()], [health.failingSince, health.autoDisableAt]);
    expect(text).toContain(`failing since ${shown[0]}`);
    expect(text).toContain(`disabled at ${shown[1]}`);
    await expectAccessible(page, 'overview-failure-warnings');
    await page.close();
  });
});
