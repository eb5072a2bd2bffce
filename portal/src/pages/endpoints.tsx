import { useEffect, useState } from 'preact/hooks';
import { describeError, type Client, type Delivery, type Endpoint } from '../api/client.js';
import { parseEventTypes } from '../format.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

export function EndpointsPage({ client, canManage }: { client: Client; canManage: boolean }) {
  const [list, reload] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: 100 } } }), [client]);
  return (
    <>
      <h1>Endpoints</h1>
      {canManage && <CreateEndpoint client={client} onCreated={reload} />}
      <h2>Your endpoints</h2>
      {list.state === 'loading' && <p role="status">Loading endpoints…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>No endpoints yet.</p>}
      {list.state === 'ok' && list.value.data.length > 0 && (
        <ul class="cards">
          {list.value.data.map((endpoint) => (
            <EndpointCard key={endpoint.id} client={client} endpoint={endpoint} canManage={canManage} />
          ))}
        </ul>
      )}
    </>
  );
}

function CreateEndpoint({ client, onCreated }: { client: Client; onCreated: () => void }) {
  const [url, setUrl] = useState('');
  const [eventTypes, setEventTypes] = useState('');
  const [description, setDescription] = useState('');
  const [busy, setBusy] = useState(false);
  const [message, setMessage] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setMessage(null);
    const types = parseEventTypes(eventTypes);
    const { data, error, response } = await client
      .POST('/v1/endpoints', { body: { url, ...(types.length ? { eventTypes: types } : {}), ...(description ? { description } : {}) } })
      .catch(() => ({ data: undefined, error: undefined, response: new Response(null, { status: 0 }) }));
    setBusy(false);
    if (!data) return setMessage({ kind: 'error', text: describeError(error, response.status || undefined) });
    setUrl('');
    setEventTypes('');
    setDescription('');
    setMessage({ kind: 'ok', text: `Endpoint created. Its signing secret: ${data.secret ?? '(not shown)'} — keep it now, it is shown once.` });
    onCreated();
  };

  return (
    <form class="panel" onSubmit={submit} aria-labelledby="create-endpoint">
      <h2 id="create-endpoint">Add an endpoint</h2>
      <label for="endpoint-url">URL</label>
      <input id="endpoint-url" type="url" required placeholder="https://example.com/webhooks" value={url} onInput={(e) => setUrl(e.currentTarget.value)} />
      <label for="endpoint-types">Event types</label>
      <input id="endpoint-types" aria-describedby="endpoint-types-help" value={eventTypes} onInput={(e) => setEventTypes(e.currentTarget.value)} />
      <p id="endpoint-types-help" class="help">Separated by commas or spaces; a prefix ending in .* matches a family. Empty: every type.</p>
      <label for="endpoint-description">Description (optional)</label>
      <input id="endpoint-description" value={description} onInput={(e) => setDescription(e.currentTarget.value)} />
      <button type="submit" disabled={busy}>{busy ? 'Adding…' : 'Add endpoint'}</button>
      <div role="status" aria-live="polite">
        {message && <p class={message.kind === 'error' ? 'error' : 'ok'}>{message.text}</p>}
      </div>
    </form>
  );
}

const finished = new Set(['succeeded', 'dead']);

function EndpointCard({ client, endpoint, canManage }: { client: Client; endpoint: Endpoint; canManage: boolean }) {
  const [test, setTest] = useState<{ deliveryId?: string; delivery?: Delivery; error?: string; sending?: boolean } | null>(null);

  // Follows the test delivery until it succeeds or is given up on.
  useEffect(() => {
    const id = test?.deliveryId;
    if (!id || (test.delivery && finished.has(test.delivery.status))) return;
    const timer = setTimeout(async () => {
      const { data, error, response } = await client.GET('/v1/deliveries/{id}', { params: { path: { id } } });
      setTest((t) => (t?.deliveryId !== id ? t : data ? { ...t, delivery: data } : { ...t, error: describeError(error, response.status) }));
    }, test.delivery ? 1000 : 300);
    return () => clearTimeout(timer);
  }, [client, test]);

  const sendTest = async () => {
    setTest({ sending: true });
    const { data, error, response } = await client.POST('/v1/endpoints/{id}/test', { params: { path: { id: endpoint.id } }, body: {} });
    setTest(data ? { deliveryId: data.deliveryId } : { error: describeError(error, response.status) });
  };

  const headingId = `endpoint-${endpoint.id}`;
  return (
    <li class="card" aria-labelledby={headingId}>
      <h3 id={headingId} class="url">{endpoint.url}</h3>
      {endpoint.description && <p>{endpoint.description}</p>}
      <dl>
        <dt>Status</dt>
        <dd>{endpoint.status}{endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ''}</dd>
        <dt>Circuit</dt>
        <dd>{endpoint.circuit.state}</dd>
        <dt>Event types</dt>
        <dd>{endpoint.eventTypes.length ? endpoint.eventTypes.join(', ') : 'all'}</dd>
        <dt>ID</dt>
        <dd><code>{endpoint.id}</code></dd>
      </dl>
      <div class="actions">
        {canManage && (
          <button type="button" onClick={sendTest} disabled={test?.sending === true}>
            Send test event
          </button>
        )}
        <a href={href('deliveries', '', { endpointId: endpoint.id })}>Its deliveries</a>
      </div>
      <div role="status" aria-live="polite" class="test-status">
        {test?.sending && <p>Sending a test event…</p>}
        {test?.error && <p class="error">{test.error}</p>}
        {test?.deliveryId && (
          <p>
            Test delivery: <strong data-delivery-status>{test.delivery?.status ?? 'pending'}</strong>{' '}
            <a href={href('delivery', test.deliveryId)}>details</a>
          </p>
        )}
      </div>
    </li>
  );
}
