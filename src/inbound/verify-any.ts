import type { InboundAdapter, InboundRequest, VerifyResult } from './adapter.js';

/**
 * Verifies a callback against every secret the source accepts right now (the current one and,
 * for a while after a change, the previous one). Each candidate is checked by the adapter in
 * constant time, and every candidate is checked even after one matched, so how long verification
 * takes does not tell which secret signed. A failure is reported as the current secret's.
 */
export function verifyWithAny(adapter: InboundAdapter, request: InboundRequest, secrets: readonly [string, ...string[]]): VerifyResult {
  let matched = false;
  let failure: VerifyResult | undefined;
  for (const secret of secrets) {
    const result = adapter.verify(request, secret);
    if (result.ok) matched = true;
    else failure ??= result;
  }
  return matched ? { ok: true } : failure!;
}
