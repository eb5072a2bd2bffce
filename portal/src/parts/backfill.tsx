import { useState } from 'preact/hooks';
import { describeError, type Client } from '../api/client.js';
import type { components } from '../api/schema.js';
import { formatTime, parseEventTypes } from '../format.js';
import { href } from '../route.js';
import { isoFromLocalInput, localInputFromIso } from './time-input.js';

type Preview = components['schemas']['BackfillPreview'];

const dayMs = 86_400_000;

/**
 * Backfill in three steps, like a bulk replay: choose a window (and optionally event types), look at
 * a dry run (how many, and the oldest events), then confirm with a reason; the job's progress is
 * the replay page's.
 */
export function Backfill({ client, endpointId }: { client: Client; endpointId: string }) {
  const [since, setSince] = useState(() => new Date(Date.now() - dayMs).toISOString());
  const [until, setUntil] = useState('');
  const [types, setTypes] = useState('');
  const [preview, setPreview] = useState<Preview | null>(null);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState('');

  // A changed window makes the preview stale: it must be looked at again before backfilling.
  const change = (set: (v: string) => void) => (value: string) => {
    set(value);
    setPreview(null);
  };

  const call = async (dryRun: boolean) => {
    setBusy(true);
    setFailure('');
    const eventTypes = parseEventTypes(types);
    const body = {
      since,
      ...(until ? { until } : {}),
      ...(eventTypes.length ? { eventTypes } : {}),
      reason: dryRun ? 'preview' : reason.trim(),
      dryRun,
    };
    const { data, error, response } = await client
      .POST('/v1/endpoints/{id}/backfill', { params: { path: { id: endpointId } }, body })
      .catch(() => ({ data: undefined, error: undefined, response: new Response(null, { status: 0 }) }));
    setBusy(false);
    if (!data) return setFailure(describeError(error, response.status || undefined));
    if ('sample' in data) return setPreview(data);
    if ('id' in data) location.hash = href('replay', data.id);
  };

  return (
    <section aria-labelledby="backfill">
      <h2 id="backfill">Backfill</h2>
      <p>Deliver past events this endpoint never received (it did not exist yet, or did not take their type). Events it already has a delivery for are never sent again.</p>
      <form
        class="panel"
        onSubmit={(e) => {
          e.preventDefault();
          void call(true);
        }}
      >
        <div class="fields">
          <div>
            <label for="backfill-since">Accepted from</label>
            <input id="backfill-since" type="datetime-local" required value={localInputFromIso(since)} onChange={(e) => change(setSince)(isoFromLocalInput(e.currentTarget.value))} />
          </div>
          <div>
            <label for="backfill-until">Accepted before (now if empty)</label>
            <input id="backfill-until" type="datetime-local" value={localInputFromIso(until)} onChange={(e) => change(setUntil)(isoFromLocalInput(e.currentTarget.value))} />
          </div>
          <div>
            <label for="backfill-types">Only these event types (optional)</label>
            <input id="backfill-types" value={types} placeholder="order.created, invoice.*" onInput={(e) => change(setTypes)(e.currentTarget.value)} />
          </div>
        </div>
        <button type="submit" disabled={busy}>Preview backfill (dry run)</button>
      </form>
      <div role="status" aria-live="polite">
        {busy && <p>Working…</p>}
        {failure && <p class="error">{failure}</p>}
      </div>
      {preview && (
        <div class="panel" data-backfill-preview>
          <p data-backfill-count>
            {preview.total === 0
              ? 'Every matching event already has a delivery to this endpoint: nothing to backfill.'
              : `${preview.total} ${preview.total === 1 ? 'event' : 'events'} would be delivered. Nothing has been sent yet.`}
          </p>
          {preview.sample.length > 0 && (
            <ul aria-label="The oldest events it would deliver">
              {preview.sample.map((ev) => (
                <li key={ev.id}>
                  <a href={href('event', ev.id)}>{ev.type}</a> {formatTime(ev.createdAt)}
                </li>
              ))}
            </ul>
          )}
          {preview.total > 0 && (
            <form
              onSubmit={(e) => {
                e.preventDefault();
                void call(false);
              }}
            >
              <label for="backfill-reason">Reason (kept in the audit log)</label>
              <input id="backfill-reason" required value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
              <button type="submit" disabled={busy}>Backfill {preview.total} {preview.total === 1 ? 'event' : 'events'}</button>
            </form>
          )}
        </div>
      )}
    </section>
  );
}
