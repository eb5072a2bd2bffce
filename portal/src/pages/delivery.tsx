import { useEffect, useState } from 'preact/hooks';
import { describeError, type Attempt, type Client, type Delivery } from '../api/client.js';
import { finalDeliveryStatusValues } from '../api/enums.js';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { Confirm } from '../parts/confirm.js';
import { deadReasonText } from '../parts/dead-reasons.js';
import { LoadFailed } from '../parts/load-failed.js';
import { ReadOnlyNote } from '../parts/scope.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

const waiting: Record<string, string> = {
  circuit: 'the endpoint’s circuit to close',
  retry_delay: 'the retry delay to pass',
  scheduled: 'its scheduled time',
};

export function DeliveryPage({ client, canManage, route }: PageProps) {
  const id = route.id;
  const [result, reload] = useLoad(() => client.GET('/v1/deliveries/{id}', { params: { path: { id } } }), [client, id]);
  const open = result.state === 'ok' && !(finalDeliveryStatusValues as readonly string[]).includes(result.value.status);
  // An unfinished delivery (a replayed one too) is followed until it ends.
  useEffect(() => {
    if (!open) return;
    const timer = setTimeout(reload, 1000);
    return () => clearTimeout(timer);
  }, [result]);

  return (
    <>
      <p><a href={href('deliveries')}>← All deliveries</a></p>
      <h1>Delivery</h1>
      {result.state === 'loading' && <p role="status">Loading…</p>}
      {result.state === 'failed' && <LoadFailed what="delivery" failure={result} />}
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
            <dd>
              <a href={href('endpoint', result.value.endpointId)}><code>{result.value.endpointId}</code></a>{' '}
              (<a href={href('deliveries', '', { endpointId: result.value.endpointId })}>its deliveries</a>)
            </dd>
            <dt>Next attempt</dt>
            <dd>{formatTime(result.value.nextAttemptAt)}</dd>
            <dt>Waiting for</dt>
            <dd>{result.value.waitingFor ? waiting[result.value.waitingFor] ?? result.value.waitingFor : '—'}</dd>
            {result.value.deadReason && (
              <>
                <dt>Given up because</dt>
                <dd data-dead-reason>{deadReasonText(result.value.deadReason)}</dd>
              </>
            )}
            {result.value.lastError && (
              <>
                <dt>Last error</dt>
                <dd>{result.value.lastError}</dd>
              </>
            )}
          </dl>
          {canManage ? <Replay client={client} delivery={result.value} onReplayed={reload} /> : <ReadOnlyNote what="replaying a delivery" />}
          <EventData client={client} id={result.value.eventId} />
          <h2>Attempts</h2>
          {(result.value.attempts ?? []).length === 0 ? <p>No attempts yet.</p> : <Attempts attempts={result.value.attempts ?? []} />}
        </>
      )}
    </>
  );
}

/**
 * Sends a finished delivery again (same webhook-id and body, trigger replay), after asking why: the
 * reason goes to the audit log. The page then follows the new attempt as it arrives.
 */
function Replay({ client, delivery, onReplayed }: { client: Client; delivery: Delivery; onReplayed: () => void }) {
  const [asking, setAsking] = useState(false);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<{ kind: 'ok' | 'error'; text: string } | null>(null);
  if (delivery.status !== 'dead' && delivery.status !== 'succeeded') {
    return outcome ? <p role="status" class="ok">{outcome.text}</p> : null;
  }

  const replay = async () => {
    if (!reason.trim()) return setOutcome({ kind: 'error', text: 'Say why you replay it: the reason is kept in the audit log.' });
    setBusy(true);
    const { data, error, response } = await client
      .POST('/v1/deliveries/{id}/replay', { params: { path: { id: delivery.id } }, body: { reason: reason.trim() } })
      .catch(() => ({ data: undefined, error: undefined, response: new Response(null, { status: 0 }) }));
    setBusy(false);
    if (!data) return setOutcome({ kind: 'error', text: describeError(error, response.status || undefined) });
    setAsking(false);
    setReason('');
    setOutcome({ kind: 'ok', text: 'Replay queued: the new attempt appears below when it is made.' });
    onReplayed();
  };

  return (
    <section aria-labelledby="replay-heading">
      <h2 id="replay-heading">Replay</h2>
      {asking ? (
        <Confirm title="Replay this delivery?" confirmLabel="Replay delivery" busy={busy} onConfirm={replay} onCancel={() => setAsking(false)}>
          <p>It is sent again with the same webhook-id and body, marked webhook-replay: true.</p>
          <label for="replay-reason">Reason (kept in the audit log)</label>
          <input id="replay-reason" required value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
        </Confirm>
      ) : (
        <button type="button" onClick={() => { setOutcome(null); setAsking(true); }}>Replay…</button>
      )}
      <div role="status" aria-live="polite">{outcome && <p class={outcome.kind === 'error' ? 'error' : 'ok'}>{outcome.text}</p>}</div>
    </section>
  );
}

function Attempts({ attempts }: { attempts: Attempt[] }) {
  return (
    <ol class="cards attempts">
      {attempts.map((a) => (
        <li key={a.id} class="card">
          <h3>Attempt {a.attemptNumber}: {a.outcome}{a.trigger === 'replay' ? ' (replay)' : ''}</h3>
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
