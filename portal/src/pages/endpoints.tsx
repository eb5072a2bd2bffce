import { useState } from 'preact/hooks';
import { describeError, type Client, type Endpoint } from '../api/client.js';
import { parseEventTypes } from '../format.js';
import type { PageProps } from '../page-props.js';
import { isNarrowed, ReadOnlyNote } from '../parts/scope.js';
import { TestEvent } from '../parts/test-event.js';
import { href } from '../route.js';
import type { Session } from '../session.js';
import { useLoad } from '../use-load.js';

export function EndpointsPage({ client, session, canManage }: PageProps) {
  const [list, reload] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: 100 } } }), [client]);
  // A new endpoint would lie outside a link limited to some endpoints or types: the server refuses it.
  const canCreate = canManage && !isNarrowed(session);
  return (
    <>
      <h1>Endpoints</h1>
      {canCreate && <CreateEndpoint client={client} onCreated={reload} />}
      {!canManage && <ReadOnlyNote what="adding or changing an endpoint" />}
      {canManage && !canCreate && <p class="note">This link is limited to some endpoints or event types, so it cannot add endpoints.</p>}
      <h2>Your endpoints</h2>
      {list.state === 'loading' && <p role="status">Loading endpoints…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>No endpoints yet.</p>}
      {list.state === 'ok' && list.value.data.length > 0 && (
        <ul class="cards">
          {list.value.data.map((endpoint) => (
            <EndpointCard key={endpoint.id} client={client} session={session} endpoint={endpoint} canManage={canManage} />
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

function EndpointCard({ client, session, endpoint, canManage }: { client: Client; session: Session; endpoint: Endpoint; canManage: boolean }) {
  const headingId = `endpoint-${endpoint.id}`;
  return (
    <li class="card" aria-labelledby={headingId}>
      <h3 id={headingId} class="url"><a href={href('endpoint', endpoint.id)}>{endpoint.url}</a></h3>
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
        <a href={href('endpoint', endpoint.id)}>Settings and secret</a>
        <a href={href('deliveries', '', { endpointId: endpoint.id })}>Its deliveries</a>
      </div>
      {canManage && <TestEvent client={client} session={session} endpointId={endpoint.id} idPrefix={headingId} />}
    </li>
  );
}
