import type { Client } from '../api/client.js';
import { formatTime } from '../format.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

const statuses = ['pending', 'queued', 'in_flight', 'succeeded', 'dead'] as const;
type Status = (typeof statuses)[number];

export function DeliveriesPage({ client, endpointId, status }: { client: Client; endpointId: string; status: string }) {
  const [endpoints] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: 100 } } }), [client]);
  const [list] = useLoad(
    () =>
      client.GET('/v1/deliveries', {
        params: { query: { limit: 50, ...(endpointId ? { endpointId } : {}), ...((statuses as readonly string[]).includes(status) ? { status: status as Status } : {}) } },
      }),
    [client, endpointId, status],
  );
  const go = (next: { endpointId?: string; status?: string }) => {
    location.hash = href('deliveries', '', { endpointId: next.endpointId ?? endpointId, status: next.status ?? status });
  };

  return (
    <>
      <h1>Deliveries</h1>
      <form class="filters" aria-label="Filter deliveries" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="filter-endpoint">Endpoint</label>
          <select id="filter-endpoint" value={endpointId} onChange={(e) => go({ endpointId: e.currentTarget.value })}>
            <option value="">All endpoints</option>
            {endpoints.state === 'ok' && endpoints.value.data.map((ep) => <option key={ep.id} value={ep.id}>{ep.url}</option>)}
            {endpointId && endpoints.state === 'ok' && !endpoints.value.data.some((ep) => ep.id === endpointId) && <option value={endpointId}>{endpointId}</option>}
          </select>
        </div>
        <div>
          <label for="filter-status">Status</label>
          <select id="filter-status" value={status} onChange={(e) => go({ status: e.currentTarget.value })}>
            <option value="">Any status</option>
            {statuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
      </form>
      {list.state === 'loading' && <p role="status">Loading deliveries…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>No deliveries match.</p>}
      {list.state === 'ok' && list.value.data.length > 0 && (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Deliveries">
          <table>
            <thead>
              <tr>
                <th scope="col">Delivery</th>
                <th scope="col">Event type</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.value.data.map((d) => (
                <tr key={d.id}>
                  <td><a href={href('delivery', d.id)}>{d.id}</a></td>
                  <td>{d.eventType ?? '—'}</td>
                  <td>{d.status}</td>
                  <td>{d.attemptCount}</td>
                  <td>{formatTime(d.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}
