import { apiBase, type ApiError } from './api/client.js';

export interface Session {
  sessionToken: string;
  expiresAt: string;
  capabilities: string[];
  endpointIds: string[] | null;
  eventTypes: string[] | null;
  tenant: { id: string; name: string };
  brand: { name: string; accentColor: string | null };
}

export type ExchangeResult = { ok: true; session: Session } | { ok: false; code: string; message: string };

/**
 * Takes the link token out of the address at once (so it is in neither history, bookmarks nor a
 * shared screenshot) and returns it; null when the page was opened without one.
 */
export function takeLinkToken(): string | null {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const token = params.get('token');
  if (token !== null) history.replaceState(null, '', location.pathname + location.search);
  return token;
}

/** Exchanges a link token, once, for a session. */
export async function exchange(token: string): Promise<ExchangeResult> {
  let res: Response;
  try {
    res = await fetch(`${apiBase()}/v1/portal-sessions/exchange`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token }),
    });
  } catch {
    return { ok: false, code: 'network', message: 'The server could not be reached. Check your connection and open the link again.' };
  }
  const body = (await res.json().catch(() => undefined)) as unknown;
  if (res.ok) return { ok: true, session: body as Session };
  const error = (body as Partial<ApiError> | undefined)?.error;
  return { ok: false, code: error?.code ?? 'unknown', message: error?.message ?? `The server answered ${res.status}.` };
}
