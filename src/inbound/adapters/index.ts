import type { InboundAdapter } from '../adapter.js';
import type { HmacSourceConfig } from '../../domain/hmac-source.js';
import type { SourceType } from '../../domain/sources.js';
import { github } from './github.js';
import { configuredHmac, unconfiguredHmac } from './hmac.js';
import { momoAutomation } from './momo-automation.js';
import { momoCommunication } from './momo-communication.js';
import { shopify } from './shopify.js';
import { standardWebhooks } from './standard-webhooks.js';
import { stripe } from './stripe.js';

/**
 * The one registry of provider contracts. A new provider is one file under adapters/ plus one
 * line here (and its name in SOURCE_TYPES, src/domain/sources.ts); the intake service only ever
 * goes through adapterForSource.
 */
export const adapters: Readonly<Record<SourceType, InboundAdapter>> = {
  'momo-communication': momoCommunication,
  'momo-automation': momoAutomation,
  'standard-webhooks': standardWebhooks,
  stripe,
  github,
  shopify,
  // Each `hmac` source brings its own scheme; see adapterForSource.
  hmac: unconfiguredHmac,
};

export function isSourceType(value: string): value is SourceType {
  return Object.hasOwn(adapters, value);
}

export function getAdapter(type: SourceType): InboundAdapter {
  return adapters[type];
}

/** The adapter for one source: its type's, built from its own configuration for an `hmac` source. */
export function adapterForSource(source: { type: SourceType; hmacConfig: HmacSourceConfig | null }): InboundAdapter {
  return source.type === 'hmac' && source.hmacConfig !== null ? configuredHmac(source.hmacConfig) : getAdapter(source.type);
}
