import { useState } from 'preact/hooks';
import '../browse/browse.css';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { Pager } from '../parts/pager.js';
import { isoFromLocalInput, localInputFromIso, validIso } from '../parts/time-input.js';
import { href, type Route } from '../route.js';
import { useLoad } from '../use-load.js';

/** The search, as kept in the address: `#/events?type=&messageId=&since=&until=&cursor=`. */
type Search = { type: string; messageId: string; since: string; until: string };

const searchOf = (route: Route): Search => ({
  type: route.query.type ?? '',
  messageId: route.query.messageId ?? '',
  since: validIso(route.query.since) ?? '',
  until: validIso(route.query.until) ?? '',
});

export function EventsPage({ client, route }: PageProps) {
  const search = searchOf(route);
  const cursor = route.query.cursor ?? '';
  const [list] = useLoad(
    () =>
      client.GET('/v1/events', {
        params: {
          query: {
            limit: 50,
            ...(search.type ? { type: search.type } : {}),
            ...(search.messageId ? { messageId: search.messageId } : {}),
            ...(search.since ? { since: search.since } : {}),
            ...(search.until ? { until: search.until } : {}),
            ...(cursor ? { cursor } : {}),
          },
        },
      }),
    [client, search.type, search.messageId, search.since, search.until, cursor],
  );
  const filtered = Object.values(search).some(Boolean);

  return (
    <>
      <h1>Events</h1>
      {/* Keyed by the address: going back or following a link shows that search in the fields. */}
      <SearchForm key={JSON.stringify(search)} search={search} />
      {search.messageId && (
        <p>
          <a href={href('message', search.messageId)}>Timeline of message {search.messageId}</a>
        </p>
      )}
      {list.state === 'loading' && <p role="status">Loading events…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>{filtered ? 'No events match.' : 'No events yet.'}</p>}
      {list.state === 'ok' && list.value.data.length > 0 && (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Events found">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Type</th>
                <th scope="col">Message</th>
                <th scope="col">Received</th>
              </tr>
            </thead>
            <tbody>
              {list.value.data.map((e) => (
                <tr key={e.id}>
                  <td><a href={href('event', e.id)}>{e.id}</a></td>
                  <td>{e.type}</td>
                  <td>{e.messageId ? <a href={href('message', e.messageId)}>{e.messageId}</a> : '—'}</td>
                  <td>{formatTime(e.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.state === 'ok' && <Pager page="events" query={search} cursor={cursor} nextCursor={list.value.nextCursor} noun="events" />}
    </>
  );
}

function SearchForm({ search }: { search: Search }) {
  const [eventId, setEventId] = useState('');
  const [type, setType] = useState(search.type);
  const [messageId, setMessageId] = useState(search.messageId);
  const [since, setSince] = useState(localInputFromIso(search.since));
  const [until, setUntil] = useState(localInputFromIso(search.until));

  const submit = (e: Event) => {
    e.preventDefault();
    // An event id names one event: open it rather than search.
    if (eventId.trim()) location.hash = href('event', eventId.trim());
    else location.hash = href('events', '', { type: type.trim(), messageId: messageId.trim(), since: isoFromLocalInput(since), until: isoFromLocalInput(until) });
  };

  return (
    <form class="panel" role="search" aria-label="Search events" onSubmit={submit}>
      <div class="filters">
        <div>
          <label for="search-event-id">Event id</label>
          <input id="search-event-id" value={eventId} placeholder="evt_…" aria-describedby="search-event-id-help" onInput={(e) => setEventId(e.currentTarget.value)} />
          <p id="search-event-id-help" class="help">Opens that event; the other fields are then ignored.</p>
        </div>
        <div>
          <label for="search-message-id">Message id</label>
          <input id="search-message-id" value={messageId} onInput={(e) => setMessageId(e.currentTarget.value)} />
        </div>
        <div>
          <label for="search-type">Event type</label>
          <input id="search-type" value={type} aria-describedby="search-type-help" onInput={(e) => setType(e.currentTarget.value)} />
          <p id="search-type-help" class="help">Exact, or a family ending in .* such as invoice.*</p>
        </div>
      </div>
      <div class="filters">
        <div>
          <label for="search-since">Received from</label>
          <input id="search-since" type="datetime-local" value={since} onInput={(e) => setSince(e.currentTarget.value)} />
        </div>
        <div>
          <label for="search-until">Received before</label>
          <input id="search-until" type="datetime-local" value={until} onInput={(e) => setUntil(e.currentTarget.value)} />
        </div>
      </div>
      <div class="actions">
        <button type="submit">Search</button>
        <a href={href('events')}>Clear</a>
      </div>
    </form>
  );
}
