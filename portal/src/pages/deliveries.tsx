import { deliveryStatusValues } from '../api/enums.js';
import type { PageProps } from '../page-props.js';
import { deadReasons, isDeadReason } from '../parts/dead-reasons.js';
import { DeliveryTable } from '../parts/delivery-table.js';
import { isoFromLocalInput, localInputFromIso, validIso } from '../parts/time-input.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

const statuses = deliveryStatusValues;
type Status = (typeof statuses)[number];

/** The filters, as kept in the address: `#/deliveries?endpointId=&status=&reason=&since=&until=`. */
type Filters = { endpointId: string; status: string; reason: string; since: string; until: string };

export function DeliveriesPage({ client, route }: PageProps) {
  const f: Filters = {
    endpointId: route.query.endpointId ?? '',
    status: route.query.status ?? '',
    reason: route.query.reason ?? '',
    since: route.query.since ?? '',
    until: route.query.until ?? '',
  };
  const [endpoints] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: 100 } } }), [client]);
  const since = validIso(f.since);
  const until = validIso(f.until);
  const [list] = useLoad(
    () =>
      client.GET('/v1/deliveries', {
        params: {
          query: {
            limit: 50,
            ...(f.endpointId ? { endpointId: f.endpointId } : {}),
            ...((statuses as readonly string[]).includes(f.status) ? { status: f.status as Status } : {}),
            ...(isDeadReason(f.reason) ? { reason: f.reason } : {}),
            ...(since ? { since } : {}),
            ...(until ? { until } : {}),
          },
        },
      }),
    [client, f.endpointId, f.status, f.reason, since, until],
  );
  const go = (next: Partial<Filters>) => {
    location.hash = href('deliveries', '', { ...f, ...next });
  };

  return (
    <>
      <h1>Deliveries</h1>
      <form class="filters" aria-label="Filter deliveries" onSubmit={(e) => e.preventDefault()}>
        <div>
          <label for="filter-endpoint">Endpoint</label>
          <select id="filter-endpoint" value={f.endpointId} onChange={(e) => go({ endpointId: e.currentTarget.value })}>
            <option value="">All endpoints</option>
            {endpoints.state === 'ok' && endpoints.value.data.map((ep) => <option key={ep.id} value={ep.id}>{ep.url}</option>)}
            {f.endpointId && endpoints.state === 'ok' && !endpoints.value.data.some((ep) => ep.id === f.endpointId) && <option value={f.endpointId}>{f.endpointId}</option>}
          </select>
        </div>
        <div>
          <label for="filter-status">Status</label>
          <select id="filter-status" value={f.status} onChange={(e) => go({ status: e.currentTarget.value })}>
            <option value="">Any status</option>
            {statuses.map((s) => <option key={s} value={s}>{s}</option>)}
          </select>
        </div>
        <div>
          <label for="filter-reason">Dead-letter reason</label>
          <select id="filter-reason" value={f.reason} onChange={(e) => go({ reason: e.currentTarget.value })}>
            <option value="">Any reason</option>
            {deadReasons.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
          </select>
        </div>
        <div>
          <label for="filter-since">Created from</label>
          <input id="filter-since" type="datetime-local" value={localInputFromIso(since)} onChange={(e) => go({ since: isoFromLocalInput(e.currentTarget.value) })} />
        </div>
        <div>
          <label for="filter-until">Created before</label>
          <input id="filter-until" type="datetime-local" value={localInputFromIso(until)} onChange={(e) => go({ until: isoFromLocalInput(e.currentTarget.value) })} />
        </div>
      </form>
      {list.state === 'loading' && <p role="status">Loading deliveries…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>No deliveries match.</p>}
      {list.state === 'ok' && list.value.data.length > 0 && <DeliveryTable deliveries={list.value.data} label="Deliveries" attempts />}
    </>
  );
}
