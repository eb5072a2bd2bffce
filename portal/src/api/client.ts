import createClient, { type Middleware } from 'openapi-fetch';
import type { components, paths } from './schema.js';

export type Endpoint = components['schemas']['Endpoint'];
export type Delivery = components['schemas']['Delivery'];
export type Attempt = components['schemas']['Attempt'];
export type ApiError = components['schemas']['Error'];
export type Client = ReturnType<typeof createClient<paths>>;

/** The API lives one level above the portal: `${PUBLIC_BASE_URL}/portal/` talks to `${PUBLIC_BASE_URL}/v1/...`. */
export function apiBase(): string {
  return new URL('../', location.origin + location.pathname).href.replace(/\/$/, '');
}

/** A client that sends the session token, held only in memory, with every call. */
export function sessionClient(sessionToken: string, onUnauthorized: (error: ApiError | undefined) => void): Client {
  const client = createClient<paths>({ baseUrl: apiBase() });
  const auth: Middleware = {
    onRequest({ request }) {
      request.headers.set('authorization', `Bearer ${sessionToken}`);
      return request;
    },
    async onResponse({ response }) {
      if (response.status === 401) onUnauthorized((await response.clone().json().catch(() => undefined)) as ApiError | undefined);
      return response;
    },
  };
  client.use(auth);
  return client;
}

/** A readable sentence for a failed call, never a blank. */
export function describeError(error: unknown, status?: number): string {
  const e = error as Partial<ApiError> | undefined;
  if (e?.error?.message) return e.error.message;
  return status ? `The server answered ${status}.` : 'The server could not be reached.';
}
