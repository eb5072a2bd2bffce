import { useCallback, useEffect, useState } from 'preact/hooks';
import { describeError } from './api/client.js';

/** `status` is the HTTP status of a refusal (404: not found, or outside what this link can see). */
export type Loaded<T> = { state: 'loading' } | { state: 'failed'; message: string; status?: number } | { state: 'ok'; value: T };

/** Runs `load` when `deps` change; `reload` runs it again. */
export function useLoad<T>(load: () => Promise<{ data?: T; error?: unknown; response: Response }>, deps: unknown[]) {
  const [result, setResult] = useState<Loaded<T>>({ state: 'loading' });
  const [round, setRound] = useState(0);
  useEffect(() => {
    let live = true;
    load().then(
      ({ data, error, response }) => {
        if (!live) return;
        setResult(data !== undefined ? { state: 'ok', value: data } : { state: 'failed', message: describeError(error, response.status), status: response.status });
      },
      () => live && setResult({ state: 'failed', message: describeError(undefined) }),
    );
    return () => {
      live = false;
    };
  }, [...deps, round]);
  return [result, useCallback(() => setRound((r) => r + 1), [])] as const;
}
