import type { Client } from './api/client.js';
import type { Route } from './route.js';
import type { Session } from './session.js';

/** What every page is given: the session's API client, the session itself and the current route. */
export interface PageProps {
  client: Client;
  session: Session;
  /** The session may write (create, edit, delete, rotate, replay), not only read. */
  canManage: boolean;
  route: Route;
}
