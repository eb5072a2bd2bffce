import { useEffect } from 'preact/hooks';
import { formatTime } from '../format.js';
import type { PageProps } from '../page-props.js';
import { LoadFailed } from '../parts/load-failed.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

/** A bulk replay's progress, followed every second until none of its deliveries is still waiting. */
export function ReplayPage({ client, route }: PageProps) {
  const id = route.id;
  const [result, reload] = useLoad(() => client.GET('/v1/replays/{id}', { params: { path: { id } } }), [client, id]);
  const running = result.state === 'ok' && result.value.status === 'running';
  useEffect(() => {
    if (!running) return;
    const timer = setTimeout(reload, 1000);
    return () => clearTimeout(timer);
  }, [result]);

  return (
    <>
      <p><a href={href('replays')}>← New replay</a></p>
      <h1>Replay</h1>
      {result.state === 'loading' && <p role="status">Loading…</p>}
      {result.state === 'failed' && <LoadFailed what="replay" failure={result} />}
      {result.state === 'ok' && (
        <>
          <div role="status" aria-live="polite">
            <p data-replay-status>
              {result.value.status === 'running' ? 'Running' : 'Completed'}: {result.value.done} delivered, {result.value.failed} failed, of {result.value.total}
            </p>
          </div>
          <label for="replay-progress">Progress</label>
          <progress id="replay-progress" max={Math.max(result.value.total, 1)} value={result.value.done + result.value.failed}>
            {result.value.done + result.value.failed} of {result.value.total}
          </progress>
          <dl class="panel">
            <dt>ID</dt>
            <dd><code>{result.value.id}</code></dd>
            <dt>Started</dt>
            <dd>{formatTime(result.value.createdAt)}</dd>
            <dt>Reason</dt>
            <dd>{result.value.reason}</dd>
            <dt>Filter</dt>
            <dd><code>{JSON.stringify(result.value.filter)}</code></dd>
          </dl>
          {result.value.failed > 0 && (
            <p>
              Deliveries that failed again are dead once more: <a href={href('deliveries', '', { status: 'dead' })}>see the dead deliveries</a>.
            </p>
          )}
        </>
      )}
    </>
  );
}
