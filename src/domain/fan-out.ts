/*
 * Fan-out itself lives in SQL (`fan_out_targets`, migration 20261129000011, and `fan_out_write`,
 * 20261202000027), used by callback intake (`intake_accept_many`, a batch at a time) and by
 * publishing (`publish_events`, a batch at a time), so the two cannot drift apart:
 * one delivery per endpoint of the tenant whose filter matches the event type; disabled endpoints
 * get a dead `endpoint_disabled` delivery instead of none, so what piles up while an endpoint is off
 * can be replayed once it is back; operational events (`platform.*`) only reach endpoints that name
 * them, so a catch-all endpoint never receives a type it did not know existed. The delivery ids it
 * needs are made in TypeScript: see store/delivery-ids.ts.
 */

/** What fan-out created for one event: the delivery lifecycle accounts for it (metrics, a wake-up). */
export interface FanOutResult {
  pending: number;
  deadDisabled: number;
}
