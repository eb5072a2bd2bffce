/**
 * The delivery lifecycle's only door: everything outside src/delivery/ imports from here, so no
 * other module can change a delivery's status, or an endpoint's, except through what this exports.
 */
export { DeliveryLifecycle, type LifecycleEffects, type LifecycleLimits } from './lifecycle.js';
export {
  newDestination as newEndpointDestination,
  setStatus as setEndpointStatus,
  type DisabledEndpoint,
  type EndpointStatus,
  type FailingEndpoint,
  type StatusChange as EndpointStatusChange,
} from './endpoint-health.js';
export type { AdmissionRound, AdmittedDelivery, LocalClaims, WaitingWork } from './sql/admit.js';
export type { AttemptRecord, EgressFailure, Recorded, SuccessItem } from './sql/attempts.js';
export { warmDispatch } from './sql/attempts.js';
export type { ClaimedDelivery } from './sql/claimed.js';
export type { EndpointHeld } from './lifecycle.js';
