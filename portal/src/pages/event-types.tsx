import type { components } from '../api/schema.js';
import '../browse/browse.css';
import { indentJson, jsonTextAt } from '../browse/json-text.js';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

/** The event catalog: every type received within retention, its count and its newest event. */
export function EventTypesPage({ client }: PageProps) {
  // As text: each example is shown from the answer's own characters, as it was received.
  const [types] = useLoad(async () => {
    const { data, error, response } = await client.GET('/v1/event-types', { parseAs: 'text' });
    return { data: data === undefined ? undefined : { ...(JSON.parse(data) as components['schemas']['EventTypeList']), text: data }, error, response };
  }, [client]);
  return (
    <>
      <h1>Event types</h1>
      <p class="help">The types of the events kept now, with how many there are and the newest one as an example.</p>
      {types.state === 'loading' && <p role="status">Loading event types…</p>}
      {types.state === 'failed' && <p role="alert">{types.message}</p>}
      {types.state === 'ok' && types.value.data.length === 0 && <p>No events yet.</p>}
      {types.state === 'ok' && types.value.data.length > 0 && (
        <ul class="cards">
          {types.value.data.map((t, i) => (
            <li key={t.type} class="card" aria-labelledby={`type-${i}`} data-event-type={t.type}>
              <h2 id={`type-${i}`} class="url">{t.type}</h2>
              <dl>
                <dt>Events</dt>
                <dd data-count>{t.countCapped ? `more than ${t.count.toLocaleString()}` : t.count.toLocaleString()}</dd>
                <dt>Newest</dt>
                <dd>
                  <a href={href('event', t.latest.id)}>{formatTime(t.latest.createdAt)}</a>
                </dd>
              </dl>
              <h3>Example data</h3>
              <pre class="excerpt" data-example>{indentJson(jsonTextAt(types.value.text, ['data', i, 'latest', 'data']) ?? 'null')}</pre>
              <p><a href={href('events', '', { type: t.type })}>All {t.type} events</a></p>
            </li>
          ))}
        </ul>
      )}
      {types.state === 'ok' && types.value.truncated && (
        <p>Only the first {types.value.data.length} types are listed. <a href={href('events')}>Search events</a> by type to find the others.</p>
      )}
    </>
  );
}
