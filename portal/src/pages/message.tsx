import '../browse/browse.css';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

/** Where a message's events went: its status now, then each event with its receipts and deliveries. */
export function MessagePage({ client, route }: PageProps) {
  const messageId = route.id;
  const [timeline] = useLoad(() => client.GET('/v1/messages/{messageId}', { params: { path: { messageId } } }), [client, messageId]);
  return (
    <>
      <p><a href={href('events', '', { messageId })}>← Events of this message</a></p>
      <h1>Message</h1>
      {timeline.state === 'loading' && <p role="status">Loading the timeline…</p>}
      {timeline.state === 'failed' && <p role="alert">{timeline.message}</p>}
      {timeline.state === 'ok' && (
        <>
          <dl class="panel">
            <dt>Message id</dt>
            <dd><code>{timeline.value.messageId}</code></dd>
            <dt>Status</dt>
            <dd data-message-status>{timeline.value.status ?? '—'}{timeline.value.final ? ' (final)' : ''}</dd>
            <dt>Updated</dt>
            <dd>{formatTime(timeline.value.updatedAt)}</dd>
          </dl>
          <h2>Timeline</h2>
          {timeline.value.events.length === 0 ? (
            <p>No events of this message are visible.</p>
          ) : (
            <ol class="timeline">
              {timeline.value.events.map((e) => (
                <li key={e.id} class="card" data-timeline-event={e.id}>
                  <h3 class="url"><a href={href('event', e.id)}>{e.type}</a>{e.status ? ` → ${e.status}` : ''}{e.stale ? ' (late, not forwarded)' : ''}</h3>
                  <dl>
                    <dt>Received</dt>
                    <dd>{formatTime(e.createdAt)}</dd>
                    <dt>Receipts</dt>
                    <dd>
                      {e.receipts.count === 0 ? 'none' : e.receipts.count === 1 ? `1, at ${formatTime(e.receipts.first)}` : `${e.receipts.count}, from ${formatTime(e.receipts.first)} to ${formatTime(e.receipts.last)}`}
                    </dd>
                  </dl>
                  <h4>Deliveries</h4>
                  {e.deliveries.length === 0 ? (
                    <p>Delivered to no endpoint.</p>
                  ) : (
                    <ul>
                      {e.deliveries.map((d) => (
                        <li key={d.id}>
                          <a href={href('delivery', d.id)}>{d.id}</a>: <strong>{d.status}</strong> to <a href={href('endpoint', d.endpointId)}>{d.endpointId}</a>, {d.attemptCount} {d.attemptCount === 1 ? 'attempt' : 'attempts'}
                          {d.succeededAt ? `, succeeded ${formatTime(d.succeededAt)}` : ''}
                          {d.deadReason ? `, given up: ${d.deadReason}` : ''}
                        </li>
                      ))}
                    </ul>
                  )}
                </li>
              ))}
            </ol>
          )}
        </>
      )}
    </>
  );
}
