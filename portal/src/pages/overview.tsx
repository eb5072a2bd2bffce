import type { Client, Endpoint } from '../api/client.js';
import type { PageProps } from '../page-props.js';
import { StatsChart } from '../browse/chart.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

const endpointLimit = 100;

/** The landing page: how each endpoint did over the last 24 hours, failure warnings, open circuits, dead letters. */
export function OverviewPage({ client }: PageProps) {
  const [endpoints] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: endpointLimit } } }), [client]);
  const [dead] = useLoad(() => client.GET('/v1/dead-letters/summary'), [client]);
  const deadByEndpoint = new Map(dead.state === 'ok' ? dead.value.byEndpoint.map((e) => [e.endpointId, e.count]) : []);
  const open = endpoints.state === 'ok' ? endpoints.value.data.filter((e) => e.circuit.state !== 'closed') : [];
  // Warned (platform.endpoint.failing) and still active: the ones the platform will disable unless a delivery succeeds.
  const warned = endpoints.state === 'ok' ? endpoints.value.data.filter((e) => e.status === 'active' && e.health.warnedThreshold !== null) : [];

  return (
    <>
      <h1>Overview</h1>
      <ul class="figures" aria-label="At a glance">
        <li data-figure="dead-letters">
          <span class="figure-value">{dead.state === 'ok' ? dead.value.total : '…'}</span>
          {dead.state === 'ok' && dead.value.total > 0 ? <a href={href('deliveries', '', { status: 'dead' })}>Dead letters</a> : 'Dead letters'}
        </li>
        <li data-figure="failing-endpoints">
          <span class="figure-value">{endpoints.state === 'ok' ? warned.length : '…'}</span>
          Failing endpoints
        </li>
        <li data-figure="open-circuits">
          <span class="figure-value">{endpoints.state === 'ok' ? open.length : '…'}</span>
          Open circuits
        </li>
      </ul>
      {dead.state === 'failed' && <p role="alert">Dead letters could not be counted: {dead.message}</p>}
      {warned.length > 0 && (
        <section aria-labelledby="failing-endpoints">
          <h2 id="failing-endpoints">Endpoints failing towards an automatic disable</h2>
          <p>No delivery to these has succeeded for a while. Unless one does, the platform disables them at the time shown.</p>
          <ul>
            {warned.map((e) => (
              <li key={e.id} data-failing-endpoint={e.id}>
                <a href={href('endpoint', e.id)} class="url">{e.url}</a> — <FailureWarning health={e.health} />
              </li>
            ))}
          </ul>
        </section>
      )}
      {open.length > 0 && (
        <section aria-labelledby="open-circuits">
          <h2 id="open-circuits">Endpoints with an open circuit</h2>
          <p>Deliveries to these wait until the circuit closes again.</p>
          <ul>
            {open.map((e) => (
              <li key={e.id}>
                <a href={href('endpoint', e.id)} class="url">{e.url}</a> — <span class="open-circuit">{e.circuit.state === 'open' ? 'open' : 'half open'}</span>
                {e.circuit.openUntil && e.circuit.state === 'open' ? ` until ${new Date(e.circuit.openUntil).toLocaleTimeString()}` : ''}
              </li>
            ))}
          </ul>
        </section>
      )}
      <h2>Endpoints, last 24 hours</h2>
      {endpoints.state === 'loading' && <p role="status">Loading endpoints…</p>}
      {endpoints.state === 'failed' && <p role="alert">{endpoints.message}</p>}
      {endpoints.state === 'ok' && endpoints.value.data.length === 0 && (
        <p>No endpoints yet. <a href={href('endpoints')}>Add one on the Endpoints page.</a></p>
      )}
      {endpoints.state === 'ok' && endpoints.value.data.length > 0 && (
        <ul class="cards">
          {endpoints.value.data.map((e) => (
            <EndpointHealth key={e.id} client={client} endpoint={e} deadLetters={dead.state === 'ok' ? (deadByEndpoint.get(e.id) ?? 0) : undefined} />
          ))}
        </ul>
      )}
      {endpoints.state === 'ok' && endpoints.value.nextCursor && <p>Showing the first {endpointLimit} endpoints; the others are on the <a href={href('endpoints')}>Endpoints page</a>.</p>}
    </>
  );
}

function FailureWarning({ health }: { health: Endpoint['health'] }) {
  const share = Math.round((health.warnedThreshold ?? 0) * 100);
  return (
    <span class="open-circuit">
      failing since {new Date(health.failingSince!).toLocaleString()}, past {share} % of the time allowed; disabled at{' '}
      {new Date(health.autoDisableAt!).toLocaleString()}
    </span>
  );
}

function EndpointHealth({ client, endpoint, deadLetters }: { client: Client; endpoint: Endpoint; deadLetters: number | undefined }) {
  const [stats] = useLoad(() => client.GET('/v1/endpoints/{id}/stats', { params: { path: { id: endpoint.id } } }), [client, endpoint.id]);
  const headingId = `health-${endpoint.id}`;
  return (
    <li class="card" aria-labelledby={headingId} data-endpoint-health={endpoint.id}>
      <h3 id={headingId} class="url"><a href={href('endpoint', endpoint.id)}>{endpoint.url}</a></h3>
      <dl>
        <dt>Status</dt>
        <dd>{endpoint.status}{endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ''}</dd>
        <dt>Circuit</dt>
        <dd class={endpoint.circuit.state === 'closed' ? undefined : 'open-circuit'}>{endpoint.circuit.state.replace('_', ' ')}</dd>
        <dt>Dead letters</dt>
        <dd data-dead-letters>
          {deadLetters ?? '—'}
          {deadLetters ? <> · <a href={href('deliveries', '', { status: 'dead', endpointId: endpoint.id })}>list them</a></> : null}
        </dd>
      </dl>
      {stats.state === 'loading' && <p role="status">Loading statistics…</p>}
      {stats.state === 'failed' && <p role="alert">{stats.message}</p>}
      {stats.state === 'ok' && <StatsChart stats={stats.value} label={`Attempts to ${endpoint.url}`} />}
    </li>
  );
}
