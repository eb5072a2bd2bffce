/** Why a delivery was given up on (its dead-letter reason), as the API names it and in words. */
export const deadReasons = [
  ['max_attempts', 'Ran out of attempts'],
  ['max_age', 'Too old to retry'],
  ['terminal', 'Refused by the receiver'],
  ['endpoint_disabled', 'Endpoint disabled'],
] as const;

export type DeadReason = (typeof deadReasons)[number][0];

export const isDeadReason = (v: string | undefined): v is DeadReason => deadReasons.some(([r]) => r === v);

export const deadReasonText = (reason: string) => deadReasons.find(([r]) => r === reason)?.[1] ?? reason;
