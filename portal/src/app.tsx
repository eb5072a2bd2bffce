import { useEffect, useMemo, useState } from 'preact/hooks';
import { sessionClient, type ApiError } from './api/client.js';
import { ErrorPage } from './pages/error.js';
import { DeliveriesPage } from './pages/deliveries.js';
import { DeliveryPage } from './pages/delivery.js';
import { EndpointsPage } from './pages/endpoints.js';
import { href, useRoute } from './route.js';
import { exchange, takeLinkToken, type Session } from './session.js';

type State = { phase: 'exchanging' } | { phase: 'failed'; code: string; message: string } | { phase: 'ready'; session: Session };

// Read once per page load: the token leaves the address bar before anything renders.
const linkToken = takeLinkToken();

export function App() {
  const [state, setState] = useState<State>(() =>
    linkToken === null
      ? { phase: 'failed', code: 'no_link', message: 'Open the portal from the link you were given; each link works once.' }
      : { phase: 'exchanging' },
  );

  useEffect(() => {
    if (linkToken === null) return;
    let live = true;
    void exchange(linkToken).then((result) => {
      if (!live) return;
      if (!result.ok) return setState({ phase: 'failed', code: result.code, message: result.message });
      if (!location.hash) history.replaceState(null, '', href({ page: 'endpoints' }));
      setState({ phase: 'ready', session: result.session });
    });
    return () => {
      live = false;
    };
  }, []);

  if (state.phase === 'exchanging') return <main><p role="status">Opening your portal…</p></main>;
  if (state.phase === 'failed') return <ErrorPage code={state.code} message={state.message} />;
  return <Portal session={state.session} onEnded={(e) => setState({ phase: 'failed', code: e?.error.code ?? 'unauthorized', message: e?.error.message ?? 'Your session has ended.' })} />;
}

function Portal({ session, onEnded }: { session: Session; onEnded: (e: ApiError | undefined) => void }) {
  const route = useRoute();
  const client = useMemo(() => sessionClient(session.sessionToken, onEnded), [session.sessionToken]);
  const canManage = session.capabilities.includes('manage');
  const brandName = session.brand.name || session.tenant.name;

  useEffect(() => {
    document.title = `Webhooks · ${brandName}`;
    const accent = session.brand.accentColor;
    if (accent && /^#[0-9a-f]{6}$/i.test(accent)) document.documentElement.style.setProperty('--accent', accent);
  }, [brandName, session.brand.accentColor]);

  const current = route.page === 'endpoints' ? 'endpoints' : 'deliveries';
  return (
    <>
      <header class="top">
        <span class="brand">{brandName}</span>
        <nav aria-label="Main">
          <a href={href({ page: 'endpoints' })} aria-current={current === 'endpoints' ? 'page' : undefined}>Endpoints</a>
          <a href={href({ page: 'deliveries', endpointId: '', status: '' })} aria-current={current === 'deliveries' ? 'page' : undefined}>Deliveries</a>
        </nav>
      </header>
      <main>
        {route.page === 'endpoints' && <EndpointsPage client={client} canManage={canManage} />}
        {route.page === 'deliveries' && <DeliveriesPage client={client} endpointId={route.endpointId} status={route.status} />}
        {route.page === 'delivery' && <DeliveryPage client={client} id={route.id} />}
      </main>
    </>
  );
}
