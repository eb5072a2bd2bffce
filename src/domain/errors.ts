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

/** One problem with a request: where (a field path, a query parameter, a header, or `body`) and what. */
export interface Problem {
  path: string;
  message: string;
}

/**
 * A request that breaks its schema: every problem is listed in `details`, and the message
 * summarises them, so a client fixes everything in one round trip instead of one per problem.
 */
export class ValidationError extends AppError {
  constructor(
    readonly details: readonly Problem[],
    code = 'validation_failed',
    message?: string,
  ) {
    const lines = details.map((p) => `${p.path}: ${p.message}`);
    super(400, code, message ?? (details.length === 1 ? lines[0]! : `${details.length} problems: ${lines.join('; ')}`));
    this.name = 'ValidationError';
  }
}

/**
 * Checks beyond a request's schema, each of which may refuse it with a ValidationError, gathered so
 * that the request is refused once with every problem they found (see `refusal` for its code: a
 * refused URL's, say `private_address`).
 */
export class ValidationProblems {
  private readonly found: ValidationError[] = [];

  /** Runs one check: its result, or undefined when it refused (its problems are kept). */
  async check<T>(run: () => T | Promise<T>): Promise<T | undefined> {
    try {
      return await run();
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      this.found.push(err);
      return undefined;
    }
  }

  throwIfAny(): void {
    if (this.found.length === 0) return;
    if (this.found.length === 1) throw this.found[0]!;
    throw refusal(this.found.flatMap((e) => e.details.map((p) => ({ ...p, ...(e.code !== 'validation_failed' && { code: e.code }) }))));
  }
}

/** A problem, with the error code its answer takes when it is the most specific one of a request (invalid_cursor, say). */
export type CodedProblem = Problem & { code?: string };

/** One refusal listing every problem, under the first specific code among them, else `validation_failed`. */
export function refusal(problems: readonly CodedProblem[]): ValidationError {
  return new ValidationError(problems.map(({ path, message }) => ({ path, message })), problems.find((p) => p.code)?.code);
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
