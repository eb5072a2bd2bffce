import { pino, type Logger } from 'pino';

/** Paths that could carry credentials are censored wherever they appear in a log line. */
const redact = [
  'req.headers.authorization',
  'req.headers["x-signature"]',
  'req.headers["x-momo-signature"]',
  'req.headers["webhook-signature"]',
  '*.secret',
  '*.apiKey',
  '*.password',
  // Portal link and session tokens (POST /v1/portal-sessions/exchange and its answer).
  '*.token',
  '*.sessionToken',
  '*.linkToken',
];

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  return pino({ level, redact: { paths: redact, censor: '[redacted]' }, base: { pid: process.pid } }, destination as never);
}

export type { Logger };
