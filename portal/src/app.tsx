import { useEffect, useMemo, useState } from 'preact/hooks';
import { sessionClient, type ApiError } from './api/client.js';
import { ErrorPage } from './pages/error.js';
import { AuditPage } from './pages/audit.js';
import { DeliveriesPage } from './pages/deliveries.js';
import { DeliveryPage } from './pages/delivery.js';
import { EndpointPage } from './pages/endpoint.js';
import { EndpointsPage } from './pages/endpoints.js';
import { EventPage } from './pages/event.js';
import { EventTypesPage } from './pages/event-types.js';
import { EventsPage } from './pages/events.js';
import { MessagePage } from './pages/message.js';
import { OverviewPage } from './pages/overview.js';
import { ReplayPage } from './pages/replay.js';
import { ReplaysPage } from './pages/replays.js';
import type { PageProps } from './page-props.js';
import { ScopeBadges } from './parts/scope.js';
import { href, listPageOf, useRoute, type Page } from './route.js';
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
      if (!location.hash) history.replaceState(null, '', href('overview'));
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

  const props: PageProps = { client, session, canManage, route };
  const section = listPageOf(route.page);
  return (
    <>
      <header class="top">
        <span class="brand">{brandName}</span>
        <ScopeBadges session={session} canManage={canManage} />
        <nav aria-label="Main">
          {sections.map(([page, label]) => (
            <a key={page} href={href(page)} aria-current={section === page ? 'page' : undefined}>{label}</a>
          ))}
        </nav>
      </header>
      <main>
        <CurrentPage {...props} />
      </main>
    </>
  );
}

/** The navigation, in order: the list page each section opens on, and its label. */
const sections: [Page, string][] = [
  ['overview', 'Overview'],
  ['endpoints', 'Endpoints'],
  ['event-types', 'Event types'],
  ['events', 'Events'],
  ['deliveries', 'Deliveries'],
  ['replays', 'Replays'],
  ['audit', 'Audit log'],
];

function CurrentPage(props: PageProps) {
  const { route } = props;
  switch (route.page) {
    case 'overview':
      return <OverviewPage {...props} />;
    case 'endpoints':
      return <EndpointsPage {...props} />;
    case 'endpoint':
      return <EndpointPage {...props} />;
    case 'event-types':
      return <EventTypesPage {...props} />;
    case 'events':
      return <EventsPage {...props} />;
    case 'event':
      return <EventPage {...props} />;
    case 'message':
      return <MessagePage {...props} />;
    case 'deliveries':
      return <DeliveriesPage {...props} />;
    case 'delivery':
      return <DeliveryPage {...props} />;
    case 'replays':
      return <ReplaysPage {...props} />;
    case 'replay':
      return <ReplayPage {...props} />;
    case 'audit':
      return <AuditPage {...props} />;
  }
}
