import { useEffect, useState } from 'preact/hooks';
import { describeError, type Client, type Delivery } from '../api/client.js';
import { finalDeliveryStatusValues } from '../api/enums.js';
import { href } from '../route.js';
import type { Session } from '../session.js';

const finished = new Set<string>(finalDeliveryStatusValues);
const platformTest = 'platform.test';

/**
 * The first exact type a link limited to event types covers: the test must be one of them (the
 * server refuses platform.test there, as the link could not see its delivery). '' when the link
 * covers only prefixes, so the visitor types one.
 */
export function defaultTestType(session: Session): string {
  if (session.eventTypes.length === 0) return platformTest;
  return session.eventTypes.find((t) => !t.endsWith('.*')) ?? '';
}

/** Sends a test event to one endpoint and follows its delivery until it succeeds or is given up on. */
export function TestEvent({ client, session, endpointId, idPrefix }: { client: Client; session: Session; endpointId: string; idPrefix: string }) {
  const limited = session.eventTypes.length > 0;
  const [type, setType] = useState(() => defaultTestType(session));
  const [test, setTest] = useState<{ deliveryId?: string; delivery?: Delivery; error?: string; sending?: boolean } | null>(null);

  useEffect(() => {
    const id = test?.deliveryId;
    if (!id || (test.delivery && finished.has(test.delivery.status))) return;
    const timer = setTimeout(async () => {
      const { data, error, response } = await client.GET('/v1/deliveries/{id}', { params: { path: { id } } });
      setTest((t) => (t?.deliveryId !== id ? t : data ? { ...t, delivery: data } : { ...t, error: describeError(error, response.status) }));
    }, test.delivery ? 1000 : 300);
    return () => clearTimeout(timer);
  }, [client, test]);

  const send = async (e: Event) => {
    e.preventDefault();
    setTest({ sending: true });
    const body = limited ? { type: type.trim() } : {};
    const { data, error, response } = await client
      .POST('/v1/endpoints/{id}/test', { params: { path: { id: endpointId } }, body })
      .catch(() => ({ data: undefined, error: undefined, response: new Response(null, { status: 0 }) }));
    setTest(data ? { deliveryId: data.deliveryId } : { error: describeError(error, response.status || undefined) });
  };

  const last = test?.delivery?.attempts?.at(-1);
  return (
    <form class="test-event" onSubmit={send}>
      {limited && (
        <>
          <label for={`${idPrefix}-test-type`}>Test event type</label>
          <input id={`${idPrefix}-test-type`} required value={type} aria-describedby={`${idPrefix}-test-type-help`} onInput={(e) => setType(e.currentTarget.value)} />
          <p id={`${idPrefix}-test-type-help`} class="help">
            This link covers only {session.eventTypes.join(', ')}, so the test event must be one of these types (not {platformTest}).
          </p>
        </>
      )}
      <button type="submit" disabled={test?.sending === true}>Send test event</button>
      <div role="status" aria-live="polite" class="test-status">
        {test?.sending && <p>Sending a test event…</p>}
        {test?.error && <p class="error">{test.error}</p>}
        {test?.deliveryId && (
          <p>
            Test delivery: <strong data-delivery-status>{test.delivery?.status ?? 'pending'}</strong>
            {last && <> (attempt {last.attemptNumber}: {last.statusCode ?? last.errorClass ?? last.outcome}, {last.durationMs} ms)</>}{' '}
            <a href={href('delivery', test.deliveryId)}>details</a>
          </p>
        )}
      </div>
    </form>
  );
}
