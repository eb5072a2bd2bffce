import type { components } from '../api/schema.js';
import '../browse/browse.css';
import { indentJson, jsonTextAt } from '../browse/json-text.js';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

/** One event: what it is, how many callbacks carried it, where it was delivered, its payload. */
export function EventPage({ client, route }: PageProps) {
  const id = route.id;
  // As text: the payload is shown from the answer's own characters, as it was received.
  const [event] = useLoad(async () => {
    const { data, error, response } = await client.GET('/v1/events/{id}', { params: { path: { id } }, parseAs: 'text' });
    return { data: data === undefined ? undefined : { ...(JSON.parse(data) as components['schemas']['Event']), text: data }, error, response };
  }, [client, id]);
  return (
    <>
      <p><a href={href('events')}>← Search events</a></p>
      <h1>Event</h1>
      {event.state === 'loading' && <p role="status">Loading the event…</p>}
      {event.state === 'failed' && <p role="alert">{event.message}</p>}
      {event.state === 'ok' && (
        <>
          <dl class="panel">
            <dt>ID</dt>
            <dd><code>{event.value.id}</code></dd>
            <dt>Type</dt>
            <dd><a href={href('events', '', { type: event.value.type })}>{event.value.type}</a></dd>
            <dt>Message</dt>
            <dd>{event.value.messageId ? <a href={href('message', event.value.messageId)}>{event.value.messageId}</a> : '—'}</dd>
            <dt>Received</dt>
            <dd>{formatTime(event.value.createdAt)}</dd>
            <dt>From</dt>
            <dd>{event.value.origin === 'api' ? 'the API' : event.value.origin}{event.value.sourceId ? <> (source <code>{event.value.sourceId}</code>)</> : ''}</dd>
            {event.value.status && (
              <>
                <dt>Status</dt>
                <dd>{event.value.status}{event.value.stale ? ' (arrived late: older than the status already known, forwarded to nobody)' : ''}</dd>
              </>
            )}
            <dt>Receipts</dt>
            <dd data-receipts>{event.value.receiptCount ?? 0}</dd>
          </dl>
          <h2>Deliveries</h2>
          {(event.value.deliveries ?? []).length === 0 ? (
            <p>Delivered to no endpoint.</p>
          ) : (
            <div class="table-wrap" tabIndex={0} role="region" aria-label="Deliveries of this event">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Delivery</th>
                    <th scope="col">Endpoint</th>
                    <th scope="col">Status</th>
                    <th scope="col">Attempts</th>
                    <th scope="col">Last answer</th>
                  </tr>
                </thead>
                <tbody>
                  {(event.value.deliveries ?? []).map((d) => (
                    <tr key={d.id}>
                      <td><a href={href('delivery', d.id)}>{d.id}</a></td>
                      <td><a href={href('endpoint', d.endpointId)}>{d.endpointId}</a></td>
                      <td>{d.status}{d.deadReason ? ` (${d.deadReason})` : ''}</td>
                      <td>{d.attemptCount}</td>
                      <td>{d.lastStatusCode ?? d.lastError ?? '—'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          )}
          <h2>Payload</h2>
          <p class="help">The body every endpoint receives.</p>
          <pre class="excerpt" data-event-payload>{indentJson(jsonTextAt(event.value.text, ['payload']) ?? 'null')}</pre>
        </>
      )}
    </>
  );
}
