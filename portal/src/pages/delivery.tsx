import { useEffect } from 'preact/hooks';
import type { Attempt, Client } from '../api/client.js';
import { formatTime } from '../format.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

const waiting: Record<string, string> = {
  circuit: 'the endpoint’s circuit to close',
  retry_delay: 'the retry delay to pass',
  scheduled: 'its scheduled time',
};

export function DeliveryPage({ client, id }: { client: Client; id: string }) {
  const [result, reload] = useLoad(() => client.GET('/v1/deliveries/{id}', { params: { path: { id } } }), [client, id]);
  const open = result.state === 'ok' && !['succeeded', 'dead'].includes(result.value.status);
  // An unfinished delivery is followed until it ends.
  useEffect(() => {
    if (!open) return;
    const timer = setTimeout(reload, 2000);
    return () => clearTimeout(timer);
  }, [result]);

  return (
    <>
      <p><a href={href('deliveries')}>← All deliveries</a></p>
      <h1>Delivery</h1>
      {result.state === 'loading' && <p role="status">Loading…</p>}
      {result.state === 'failed' && <p role="alert">{result.message}</p>}
      {result.state === 'ok' && (
        <>
          <dl class="panel">
            <dt>ID</dt>
            <dd><code>{result.value.id}</code></dd>
            <dt>Status</dt>
            <dd data-delivery-status>{result.value.status}</dd>
            <dt>Event</dt>
            <dd>{result.value.eventType ?? '—'} <code>{result.value.eventId}</code></dd>
            <dt>Endpoint</dt>
            <dd><a href={href('deliveries', '', { endpointId: result.value.endpointId })}><code>{result.value.endpointId}</code></a></dd>
            <dt>Next attempt</dt>
            <dd>{formatTime(result.value.nextAttemptAt)}</dd>
            <dt>Waiting for</dt>
            <dd>{result.value.waitingFor ? waiting[result.value.waitingFor] ?? result.value.waitingFor : '—'}</dd>
            {result.value.deadReason && (
              <>
                <dt>Given up because</dt>
                <dd>{result.value.deadReason}</dd>
              </>
            )}
            {result.value.lastError && (
              <>
                <dt>Last error</dt>
                <dd>{result.value.lastError}</dd>
              </>
            )}
          </dl>
          <EventData client={client} id={result.value.eventId} />
          <h2>Attempts</h2>
          {(result.value.attempts ?? []).length === 0 ? <p>No attempts yet.</p> : <Attempts attempts={result.value.attempts ?? []} />}
        </>
      )}
    </>
  );
}

function Attempts({ attempts }: { attempts: Attempt[] }) {
  return (
    <ol class="cards attempts">
      {attempts.map((a) => (
        <li key={a.id} class="card">
          <h3>Attempt {a.attemptNumber}: {a.outcome}</h3>
          <dl>
            <dt>Time</dt>
            <dd>{formatTime(a.startedAt)}</dd>
            <dt>Trigger</dt>
            <dd>{a.trigger}</dd>
            <dt>Status code</dt>
            <dd>{a.statusCode ?? '—'}</dd>
            <dt>Latency</dt>
            <dd>{a.durationMs} ms</dd>
            <dt>Error</dt>
            <dd>{a.error ?? (a.errorClass ? a.errorClass : '—')}</dd>
            <dt>Next attempt</dt>
            <dd>{formatTime(a.nextAttemptAt)}</dd>
          </dl>
          <h4>Response</h4>
          <pre class="excerpt">{a.responseExcerpt ?? '(empty)'}</pre>
        </li>
      ))}
    </ol>
  );
}

function EventData({ client, id }: { client: Client; id: string }) {
  const [event] = useLoad(() => client.GET('/v1/events/{id}', { params: { path: { id } } }), [client, id]);
  return (
    <>
      <h2>Event</h2>
      {event.state === 'loading' && <p role="status">Loading the event…</p>}
      {event.state === 'failed' && <p role="alert">{event.message}</p>}
      {event.state === 'ok' && <pre class="excerpt" data-event-payload>{JSON.stringify(event.value.payload ?? null, null, 2)}</pre>}
    </>
  );
}
