import { useEffect, useState } from 'preact/hooks';

/** Every page of the portal, addressed by the URL fragment: `#/<path>[/<id>][?<query>]`. */
export type Page =
  | 'overview'
  | 'endpoints'
  | 'endpoint'
  | 'event-types'
  | 'events'
  | 'event'
  | 'message'
  | 'deliveries'
  | 'delivery'
  | 'replays'
  | 'replay'
  | 'audit';

export interface Route {
  page: Page;
  /** The id in `#/<path>/<id>`; '' on list pages. */
  id: string;
  /** Filters and other query parameters, '' when absent. */
  query: Readonly<Record<string, string>>;
}

/** Which page a path names, as a list (no id) and as a detail (with an id). */
const paths: Record<string, { list: Page; detail?: Page }> = {
  overview: { list: 'overview' },
  endpoints: { list: 'endpoints', detail: 'endpoint' },
  'event-types': { list: 'event-types' },
  events: { list: 'events', detail: 'event' },
  messages: { list: 'events', detail: 'message' },
  deliveries: { list: 'deliveries', detail: 'delivery' },
  replays: { list: 'replays', detail: 'replay' },
  audit: { list: 'audit' },
};

const pathOf: Record<Page, string> = {
  overview: 'overview',
  endpoints: 'endpoints',
  endpoint: 'endpoints',
  'event-types': 'event-types',
  events: 'events',
  event: 'events',
  message: 'messages',
  deliveries: 'deliveries',
  delivery: 'deliveries',
  replays: 'replays',
  replay: 'replays',
  audit: 'audit',
};

/** The list page a page belongs to (a delivery to deliveries, a message to events): its navigation entry. */
export function listPageOf(page: Page): Page {
  return paths[pathOf[page]]!.list;
}

export function parseRoute(hash: string): Route {
  const [path = '', search = ''] = hash.replace(/^#/, '').split('?');
  const [head = '', rawId = ''] = path.split('/').filter(Boolean);
  const known = paths[head];
  const query = Object.fromEntries(new URLSearchParams(search));
  if (!known) return { page: 'overview', id: '', query: {} };
  const id = decodeURIComponent(rawId);
  if (id && known.detail) return { page: known.detail, id, query };
  return { page: known.list, id: '', query };
}

/** The fragment for a page; empty query values are left out. */
export function href(page: Page, id = '', query: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v) q.set(k, v);
  const s = q.toString();
  return `#/${pathOf[page]}${id ? `/${encodeURIComponent(id)}` : ''}${s ? `?${s}` : ''}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', update);
    return () => removeEventListener('hashchange', update);
  }, []);
  return route;
}
