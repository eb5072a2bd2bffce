import createClient from 'openapi-fetch';
import { apiBase, type ApiError } from './api/client.js';
import type { components, paths } from './api/schema.js';

export type Session = components['schemas']['PortalSessionExchanged'];

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
  const client = createClient<paths>({ baseUrl: apiBase() });
  try {
    const { data, error, response } = await client.POST('/v1/portal-sessions/exchange', { body: { token } });
    if (data) return { ok: true, session: data };
    const e = (error as Partial<ApiError> | undefined)?.error;
    return { ok: false, code: e?.code ?? 'unknown', message: e?.message ?? `The server answered ${response.status}.` };
  } catch {
    return { ok: false, code: 'network', message: 'The server could not be reached. Check your connection and open the link again.' };
  }
}
