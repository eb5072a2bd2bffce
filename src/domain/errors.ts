/**
 * One error type the API maps to HTTP. The code is stable and machine-readable; the message is for
 * people. Expected outcomes of delivery (a 500 from an endpoint, say) are results, not errors.
 */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
  }
}

export const badRequest = (code: string, message: string) => new AppError(400, code, message);
export const unauthorized = (message = 'missing or invalid credentials') => new AppError(401, 'unauthorized', message);
export const forbidden = (message: string) => new AppError(403, 'forbidden', message);
export const notFound = (what: string) => new AppError(404, 'not_found', `${what} not found`);
export const conflict = (code: string, message: string) => new AppError(409, code, message);

/** Storage or queue unavailable: the caller should come back, so 503 with Retry-After. */
export class UnavailableError extends AppError {
  constructor(what: string, retryAfterSeconds = 5) {
    super(503, 'unavailable', `${what} is unavailable; retry later`, { 'retry-after': String(retryAfterSeconds) });
  }
}
