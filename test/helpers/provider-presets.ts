import { randomUUID } from 'node:crypto';
import { sign as signGithub } from '@octokit/webhooks-methods';
import { getHmac as shopifyHmac } from '@shopify/shopify-api/test-helpers';
import Stripe from 'stripe';
import type { Callback } from './intake.js';

/**
 * Callbacks signed by the providers' own libraries, so the presets are checked against what
 * Stripe, GitHub and Shopify actually send rather than against our reading of their docs.
 */

const stripeClient = new Stripe('sk_test_unused');
const nowSeconds = () => Math.floor(Date.now() / 1000);
const json = { 'content-type': 'application/json' };

export const stripeEvent = (id = `evt_${randomUUID().replaceAll('-', '')}`, type = 'invoice.paid', objectId = `in_${randomUUID().slice(0, 8)}`) =>
  JSON.stringify({ id, object: 'event', api_version: '2024-06-20', created: nowSeconds(), type, livemode: false, data: { object: { id: objectId, object: 'invoice', amount_paid: 4200 } } });

export const githubPush = (ref = 'refs/heads/main') => JSON.stringify({ ref, before: '0'.repeat(40), after: 'a'.repeat(40), repository: { id: 1, full_name: 'octo/repo' } });

export const shopifyOrder = (id = Math.floor(Math.random() * 1e12)) => JSON.stringify({ id, email: 'buyer@example.com', total_price: '42.00', currency: 'EUR' });

export const presets = {
  /** Stripe's own test header; with several secrets, one `v1=` per secret as Stripe sends while rolling. */
  stripe(secrets: string | string[], body: string, timestamp = nowSeconds()): Callback {
    const headers = [secrets].flat().map((secret) => stripeClient.webhooks.generateTestHeaderString({ payload: body, secret, timestamp }));
    const v1s = headers.map((h) => h.split(',').find((part) => part.startsWith('v1='))!);
    return { rawBody: body, headers: { ...json, 'stripe-signature': [`t=${timestamp}`, ...v1s].join(',') } };
  },
  async github(secret: string, body: string, delivery: string = randomUUID(), event = 'push'): Promise<Callback> {
    return {
      rawBody: body,
      headers: { ...json, 'x-hub-signature-256': await signGithub(secret, body), 'x-github-delivery': delivery, 'x-github-event': event, 'user-agent': 'GitHub-Hookshot/test' },
    };
  },
  shopify(secret: string, body: string, webhookId: string = randomUUID(), topic = 'orders/create'): Callback {
    return {
      rawBody: body,
      headers: {
        ...json,
        'x-shopify-hmac-sha256': shopifyHmac(body, secret),
        'x-shopify-webhook-id': webhookId,
        'x-shopify-topic': topic,
        'x-shopify-shop-domain': 'test-shop.myshopify.com',
        'x-shopify-api-version': '2025-01',
      },
    };
  },
};
