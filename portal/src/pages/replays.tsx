import { useState } from 'preact/hooks';
import { describeError, type Delivery } from '../api/client.js';
import type { PageProps } from '../page-props.js';
import { deadReasons, isDeadReason } from '../parts/dead-reasons.js';
import { DeliveryTable } from '../parts/delivery-table.js';
import { ReadOnlyNote } from '../parts/scope.js';
import { isoFromLocalInput, localInputFromIso, validIso } from '../parts/time-input.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

interface FilterForm {
  status: 'dead' | 'succeeded';
  endpointId: string;
  reason: string;
  eventType: string;
  since: string;
  until: string;
}

/** The API's filter: empty fields left out, a reason only with dead deliveries (succeeded ones have none). */
function filterOf(form: FilterForm) {
  const since = validIso(form.since);
  const until = validIso(form.until);
  return {
    status: form.status,
    ...(form.endpointId ? { endpointId: form.endpointId } : {}),
    ...(form.status === 'dead' && isDeadReason(form.reason) ? { reason: form.reason } : {}),
    ...(form.eventType.trim() ? { eventType: form.eventType.trim() } : {}),
    ...(since ? { since } : {}),
    ...(until ? { until } : {}),
  };
}

type Preview = { count: number; matching: number; sample: Delivery[] };

/**
 * A bulk replay in three steps: choose a filter, look at a dry run (how many, and the first ones),
 * then confirm with a reason. The filter starts from the address, so other pages can link here
 * with one ready (e.g. an endpoint's dead deliveries).
 */
export function ReplaysPage({ client, canManage, route }: PageProps) {
  const [form, setForm] = useState<FilterForm>(() => ({
    status: route.query.status === 'succeeded' ? 'succeeded' : 'dead',
    endpointId: route.query.endpointId ?? '',
    reason: route.query.reason ?? '',
    eventType: route.query.eventType ?? '',
    since: validIso(route.query.since) ?? '',
    until: validIso(route.query.until) ?? '',
  }));
  const [preview, setPreview] = useState<Preview | null>(null);
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState('');
  const [endpoints] = useLoad(() => client.GET('/v1/endpoints', { params: { query: { limit: 100 } } }), [client]);
  const listed = endpoints.state === 'ok' ? endpoints.value.data : [];

  // A changed filter makes the preview stale: it must be looked at again before replaying.
  const set = (field: keyof FilterForm, value: string) => {
    setForm((f) => ({ ...f, [field]: value }));
    setPreview(null);
  };

  const call = async (dryRun: boolean) => {
    setBusy(true);
    setFailure('');
    const { data, error, response } = await client
      .POST('/v1/replays', { body: { filter: filterOf(form), reason: dryRun ? 'preview' : reason.trim(), dryRun } })
      .catch(() => ({ data: undefined, error: undefined, response: new Response(null, { status: 0 }) }));
    setBusy(false);
    if (!data) return setFailure(describeError(error, response.status || undefined));
    if (dryRun) return setPreview({ count: data.count, matching: data.matching ?? data.count, sample: data.sample ?? [] });
    if (data.id) location.hash = href('replay', data.id);
  };

  if (!canManage) {
    return (
      <>
        <h1>Replay deliveries</h1>
        <ReadOnlyNote what="replaying deliveries" />
      </>
    );
  }

  return (
    <>
      <h1>Replay deliveries</h1>
      <p>Send finished deliveries again, with the same webhook-id and body, paced so your receiver sees a steady stream.</p>
      <form
        class="panel"
        aria-labelledby="replay-filter"
        onSubmit={(e) => {
          e.preventDefault();
          void call(true);
        }}
      >
        <h2 id="replay-filter">1. Which deliveries</h2>
        <div class="fields">
          <div>
            <label for="replay-status">Status</label>
            <select id="replay-status" value={form.status} onChange={(e) => set('status', e.currentTarget.value)}>
              <option value="dead">Dead (given up on)</option>
              <option value="succeeded">Succeeded</option>
            </select>
          </div>
          <div>
            <label for="replay-endpoint">Endpoint</label>
            <select id="replay-endpoint" value={form.endpointId} onChange={(e) => set('endpointId', e.currentTarget.value)}>
              <option value="">All endpoints</option>
              {listed.map((ep) => <option key={ep.id} value={ep.id}>{ep.url}</option>)}
              {/* The endpoint the form was opened with, until (or unless) the list shows it: the
                  select must never show "All endpoints" for a form that replays one. */}
              {form.endpointId && !listed.some((ep) => ep.id === form.endpointId) && <option value={form.endpointId}>{form.endpointId}</option>}
            </select>
          </div>
          <div>
            <label for="replay-reason-filter">Dead-letter reason</label>
            <select id="replay-reason-filter" value={form.reason} disabled={form.status !== 'dead'} onChange={(e) => set('reason', e.currentTarget.value)}>
              <option value="">Any reason</option>
              {deadReasons.map(([value, label]) => <option key={value} value={value}>{label}</option>)}
            </select>
          </div>
          <div>
            <label for="replay-type">Event type</label>
            <input id="replay-type" value={form.eventType} placeholder="order.created or order.*" onInput={(e) => set('eventType', e.currentTarget.value)} />
          </div>
          <div>
            <label for="replay-since">Created from</label>
            <input id="replay-since" type="datetime-local" value={localInputFromIso(form.since)} onChange={(e) => set('since', isoFromLocalInput(e.currentTarget.value))} />
          </div>
          <div>
            <label for="replay-until">Created before</label>
            <input id="replay-until" type="datetime-local" value={localInputFromIso(form.until)} onChange={(e) => set('until', isoFromLocalInput(e.currentTarget.value))} />
          </div>
        </div>
        <button type="submit" disabled={busy}>Preview (dry run)</button>
      </form>
      <div role="status" aria-live="polite">
        {busy && <p>Working…</p>}
        {failure && <p class="error">{failure}</p>}
      </div>
      {preview && (
        <section class="panel" aria-labelledby="replay-preview">
          <h2 id="replay-preview">2. Preview</h2>
          <p data-replay-count>
            {preview.count === 0
              ? 'No delivery matches: nothing would be replayed.'
              : `${preview.count} ${preview.count === 1 ? 'delivery' : 'deliveries'} would be replayed${preview.matching > preview.count ? ` (the first ${preview.count} of ${preview.matching} that match)` : ''}. Nothing has been sent yet.`}
          </p>
          {preview.sample.length > 0 && <DeliveryTable deliveries={preview.sample} label="The first deliveries it would replay" />}
          {preview.count > 0 && (
            <form
              onSubmit={(e) => {
                e.preventDefault();
                void call(false);
              }}
            >
              <h2>3. Confirm</h2>
              <label for="replay-reason">Reason (kept in the audit log)</label>
              <input id="replay-reason" required value={reason} onInput={(e) => setReason(e.currentTarget.value)} />
              <button type="submit" disabled={busy}>Replay {preview.count} {preview.count === 1 ? 'delivery' : 'deliveries'}</button>
            </form>
          )}
        </section>
      )}
    </>
  );
}
