import { useState } from 'preact/hooks';
import '../browse/browse.css';
import type { components } from '../api/schema.js';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { Pager } from '../parts/pager.js';
import { isoFromLocalInput, localInputFromIso, validIso } from '../parts/time-input.js';
import { href, type Page, type Route } from '../route.js';
import { useLoad } from '../use-load.js';

type AuditEntry = components['schemas']['AuditEntry'];

/**
 * Who did what, why and when, to what this link can see: its endpoints (created, changed, secret
 * shown or rotated), their deliveries (replayed) and its replays. The server leaves out entries
 * about sources, API keys and portal links, which belong to API key holders.
 */
type Filter = { targetType: string; action: string; since: string; until: string };

const targetTypes = ['endpoint', 'delivery', 'replay'] as const;

const filterOf = (route: Route): Filter => ({
  targetType: (targetTypes as readonly string[]).includes(route.query.targetType ?? '') ? route.query.targetType! : '',
  action: route.query.action ?? '',
  since: validIso(route.query.since) ?? '',
  until: validIso(route.query.until) ?? '',
});

const pageOfTarget: Record<string, Page> = { endpoint: 'endpoint', delivery: 'delivery', replay: 'replay' };

const actorNames: Record<string, string> = { api_key: 'API key', portal_session: 'portal link', admin: 'operator', system: 'the platform' };

export function AuditPage({ client, route, session }: PageProps) {
  const filter = filterOf(route);
  const cursor = route.query.cursor ?? '';
  const [list] = useLoad(
    () =>
      client.GET('/v1/audit-log', {
        params: {
          query: {
            limit: 50,
            ...(filter.targetType ? { targetType: filter.targetType } : {}),
            ...(filter.action ? { action: filter.action } : {}),
            ...(filter.since ? { since: filter.since } : {}),
            ...(filter.until ? { until: filter.until } : {}),
            ...(cursor ? { cursor } : {}),
          },
        },
      }),
    [client, filter.targetType, filter.action, filter.since, filter.until, cursor],
  );
  const filtered = Object.values(filter).some(Boolean);

  return (
    <>
      <h1>Audit log</h1>
      <p class="help">Changes to endpoints, replays and secrets this link can see, newest first. Actions of this link are marked “this link”.</p>
      <FilterForm key={JSON.stringify(filter)} filter={filter} />
      {list.state === 'loading' && <p role="status">Loading the audit log…</p>}
      {list.state === 'failed' && <p role="alert">{list.message}</p>}
      {list.state === 'ok' && list.value.data.length === 0 && <p>{filtered ? 'No entries match.' : 'Nothing has been changed yet.'}</p>}
      {list.state === 'ok' && list.value.data.length > 0 && (
        <div class="table-wrap" tabIndex={0} role="region" aria-label="Audit entries">
          <table>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Action</th>
                <th scope="col">On</th>
                <th scope="col">By</th>
                <th scope="col">Reason</th>
              </tr>
            </thead>
            <tbody>
              {list.value.data.map((e) => (
                <tr key={e.id} data-audit-action={e.action}>
                  <td>{formatTime(e.createdAt)}</td>
                  <td>{e.action}</td>
                  <td><Target entry={e} /></td>
                  <td>{e.actor.type === 'portal_session' && e.actor.id === session.id ? 'this link' : actorNames[e.actor.type] ?? e.actor.type}</td>
                  <td>{e.reason ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {list.state === 'ok' && <Pager page="audit" query={filter} cursor={cursor} nextCursor={list.value.nextCursor} noun="entries" />}
    </>
  );
}

function Target({ entry }: { entry: AuditEntry }) {
  const page = pageOfTarget[entry.target.type];
  return (
    <>
      {entry.target.type}{' '}
      {page ? <a href={href(page, entry.target.id)}>{entry.target.id}</a> : <code>{entry.target.id}</code>}
    </>
  );
}

function FilterForm({ filter }: { filter: Filter }) {
  const [targetType, setTargetType] = useState(filter.targetType);
  const [action, setAction] = useState(filter.action);
  const [since, setSince] = useState(localInputFromIso(filter.since));
  const [until, setUntil] = useState(localInputFromIso(filter.until));
  const submit = (e: Event) => {
    e.preventDefault();
    location.hash = href('audit', '', { targetType, action: action.trim(), since: isoFromLocalInput(since), until: isoFromLocalInput(until) });
  };
  return (
    <form class="panel" role="search" aria-label="Filter the audit log" onSubmit={submit}>
      <div class="filters">
        <div>
          <label for="audit-target">Target type</label>
          <select id="audit-target" value={targetType} onChange={(e) => setTargetType(e.currentTarget.value)}>
            <option value="">Anything</option>
            {targetTypes.map((t) => <option key={t} value={t}>{t}</option>)}
          </select>
        </div>
        <div>
          <label for="audit-action">Action</label>
          <input id="audit-action" value={action} placeholder="endpoint.secret_rotated" onInput={(e) => setAction(e.currentTarget.value)} />
        </div>
      </div>
      <div class="filters">
        <div>
          <label for="audit-since">From</label>
          <input id="audit-since" type="datetime-local" value={since} onInput={(e) => setSince(e.currentTarget.value)} />
        </div>
        <div>
          <label for="audit-until">Before</label>
          <input id="audit-until" type="datetime-local" value={until} onInput={(e) => setUntil(e.currentTarget.value)} />
        </div>
      </div>
      <div class="actions">
        <button type="submit">Filter</button>
        <a href={href('audit')}>Clear</a>
      </div>
    </form>
  );
}
