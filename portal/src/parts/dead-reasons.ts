import { deadLetterReasonValues } from '../api/enums.js';
import type { components } from '../api/schema.js';

export type DeadReason = components['schemas']['DeadLetterReason'];

/** Each dead-letter reason in words; the reasons themselves come from the API's own document. */
const words: Record<DeadReason, string> = {
  max_attempts: 'Ran out of attempts',
  max_age: 'Too old to retry',
  terminal: 'Refused by the receiver',
  endpoint_disabled: 'Endpoint disabled',
  endpoint_deleted: 'Endpoint deleted',
};

/** Why a delivery was given up on (its dead-letter reason), as the API names it and in words. */
export const deadReasons = deadLetterReasonValues.map((reason) => [reason, words[reason]] as const);

export const isDeadReason = (v: string | undefined): v is DeadReason => (deadLetterReasonValues as readonly string[]).includes(v ?? '');

export const deadReasonText = (reason: string) => (isDeadReason(reason) ? words[reason] : reason);
