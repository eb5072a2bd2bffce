import type { InboundAdapter } from '../adapter.js';
import type { SourceType } from '../../domain/sources.js';
import { momoAutomation } from './momo-automation.js';
import { momoCommunication } from './momo-communication.js';
import { standardWebhooks } from './standard-webhooks.js';

/**
 * The one registry of provider contracts. A new provider is one file under adapters/ plus one
 * line here (and its name in SOURCE_TYPES, src/domain/sources.ts); the intake service only ever
 * goes through getAdapter.
 */
export const adapters: Readonly<Record<SourceType, InboundAdapter>> = {
  'momo-communication': momoCommunication,
  'momo-automation': momoAutomation,
  'standard-webhooks': standardWebhooks,
};

export function isSourceType(value: string): value is SourceType {
  return Object.hasOwn(adapters, value);
}

export function getAdapter(type: SourceType): InboundAdapter {
  return adapters[type];
}
