import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { page: 'endpoints' }
  | { page: 'deliveries'; endpointId: string; status: string }
  | { page: 'delivery'; id: string };

export function parseRoute(hash: string): Route {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query);
  const parts = path.split('/').filter(Boolean);
  if (parts[0] === 'deliveries' && parts[1]) return { page: 'delivery', id: decodeURIComponent(parts[1]) };
  if (parts[0] === 'deliveries') return { page: 'deliveries', endpointId: params.get('endpointId') ?? '', status: params.get('status') ?? '' };
  return { page: 'endpoints' };
}

export function href(route: Route): string {
  switch (route.page) {
    case 'endpoints':
      return '#/endpoints';
    case 'delivery':
      return `#/deliveries/${encodeURIComponent(route.id)}`;
    case 'deliveries': {
      const q = new URLSearchParams();
      if (route.endpointId) q.set('endpointId', route.endpointId);
      if (route.status) q.set('status', route.status);
      const s = q.toString();
      return s ? `#/deliveries?${s}` : '#/deliveries';
    }
  }
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
