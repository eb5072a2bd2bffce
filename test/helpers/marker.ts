import { createEndpoint, publish } from './dispatch.js';
import { eventually, type TestPlatform } from './platform.js';
import { startReceiver } from './receiver.js';

/**
 * A positive signal for "the dispatcher has had its chance": publishes one marker event for a
 * tenant and receiver of its own and waits until the receiver has it. Admission rounds take every
 * due delivery, so whatever was due when this was called has been admitted by the time it returns;
 * a test then asserts that something was not sent instead of sleeping and hoping.
 */
export async function dispatchedMarker(t: TestPlatform): Promise<void> {
  const receiver = await startReceiver();
  try {
    const tenant = await t.createTenant('marker');
    await createEndpoint(tenant, { url: `${receiver.url}/marker` });
    const id = await publish(tenant, 'marker.sent');
    await eventually(async () => receiver.eventIds().has(id), 'the marker event at its receiver');
  } finally {
    await receiver.close();
  }
}
