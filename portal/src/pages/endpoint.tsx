import { useState } from 'preact/hooks';
import { describeError, type Client, type Endpoint } from '../api/client.js';
import { indentJson, jsonTextAt } from '../browse/json-text.js';
import { formatTime, parseEventTypes } from '../format.js';
import type { PageProps } from '../page-props.js';
import { Backfill } from '../parts/backfill.js';
import { Confirm } from '../parts/confirm.js';
import { LoadFailed } from '../parts/load-failed.js';
import { ReadOnlyNote } from '../parts/scope.js';
import { TestEvent } from '../parts/test-event.js';
import { href } from '../route.js';
import { useLoad } from '../use-load.js';

type Outcome = { kind: 'ok' | 'error'; text: string } | null;

/** A failed call as an outcome to show; the network being down is one too. */
async function attempt<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<{ data?: T; failure?: string }> {
  try {
    const { data, error, response } = await call;
    return data !== undefined || response.ok ? { data } : { failure: describeError(error, response.status) };
  } catch {
    return { failure: describeError(undefined) };
  }
}

export function EndpointPage({ client, session, canManage, route }: PageProps) {
  const id = route.id;
  // As text too: the content filter is shown from the answer's own characters, every digit as written.
  const [result, reload] = useLoad(async () => {
    const { data, error, response } = await client.GET('/v1/endpoints/{id}', { params: { path: { id } }, parseAs: 'text' });
    return { data: data === undefined ? undefined : { ...(JSON.parse(data) as Endpoint), text: data }, error, response };
  }, [client, id]);
  return (
    <>
      <p><a href={href('endpoints')}>← All endpoints</a></p>
      <h1>Endpoint</h1>
      {result.state === 'loading' && <p role="status">Loading…</p>}
      {result.state === 'failed' && <LoadFailed what="endpoint" failure={result} />}
      {result.state === 'ok' && (
        <>
          <Summary endpoint={result.value} />
          <Activity client={client} endpoint={result.value} canManage={canManage} />
          <h2>Send a test event</h2>
          {canManage ? <TestEvent client={client} session={session} endpointId={id} idPrefix="endpoint" /> : <ReadOnlyNote what="sending a test event" />}
          {canManage ? (
            <>
              <Settings client={client} endpoint={result.value} onSaved={reload} />
              <PauseControl client={client} endpoint={result.value} onChanged={reload} />
              <StatusControl client={client} endpoint={result.value} onChanged={reload} />
              <Backfill client={client} endpointId={id} />
              <Secret client={client} endpointId={id} />
              <Delete client={client} endpointId={id} />
            </>
          ) : (
            <>
              <h2>Settings and signing secret</h2>
              <ReadOnlyNote what="changing this endpoint, or showing and rotating its signing secret," />
            </>
          )}
        </>
      )}
    </>
  );
}

function Summary({ endpoint }: { endpoint: Endpoint & { text: string } }) {
  const filter = jsonTextAt(endpoint.text, ['filter']);
  const policy = endpoint.effectiveRetryPolicy;
  return (
    <dl class="panel">
      <dt>URL</dt>
      <dd class="url" data-endpoint-url>{endpoint.url}</dd>
      {endpoint.description && (
        <>
          <dt>Description</dt>
          <dd>{endpoint.description}</dd>
        </>
      )}
      <dt>Status</dt>
      <dd data-endpoint-status>{endpoint.status}{endpoint.disabledReason ? ` (${endpoint.disabledReason})` : ''}</dd>
      <dt>Circuit</dt>
      <dd>{endpoint.circuit.state}{endpoint.circuit.openUntil ? ` until ${formatTime(endpoint.circuit.openUntil)}` : ''}</dd>
      <dt>Event types</dt>
      <dd>{endpoint.eventTypes.length ? endpoint.eventTypes.join(', ') : 'all'}</dd>
      <dt>Content filter</dt>
      <dd data-endpoint-filter>{filter && filter !== 'null' ? <pre class="excerpt">{indentJson(filter)}</pre> : 'none: every event of those types'}</dd>
      <dt>Headers</dt>
      <dd data-endpoint-headers>{Object.keys(endpoint.headers ?? {}).length ? Object.keys(endpoint.headers ?? {}).join(', ') + ' (values hidden)' : 'none'}</dd>
      <dt>Concurrency</dt>
      <dd>at most {endpoint.maxConcurrency} at once</dd>
      <dt>Rate limit</dt>
      <dd>{endpoint.rateLimitPerSecond === null ? 'none' : `${endpoint.rateLimitPerSecond} per second`}</dd>
      <dt>Ordering</dt>
      <dd>{endpoint.ordering === 'per-message' ? 'in order per message' : 'none'}</dd>
      <dt>Retries</dt>
      <dd data-retry-policy>up to {policy.maxAttempts} attempts, first retry after {policy.baseDelayMs} ms, given up after {duration(policy.maxEventAgeSeconds)}</dd>
      <dt>ID</dt>
      <dd><code>{endpoint.id}</code></dd>
    </dl>
  );
}

/** Whole days or hours when the value is one, else seconds: "3 days", not "259200 s". */
function duration(seconds: number): string {
  const unit = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
  if (seconds % 86_400 === 0) return unit(seconds / 86_400, 'day');
  if (seconds % 3_600 === 0) return unit(seconds / 3_600, 'hour');
  return `${seconds} s`;
}

function Activity({ client, endpoint, canManage }: { client: Client; endpoint: Endpoint; canManage: boolean }) {
  const [stats] = useLoad(() => client.GET('/v1/endpoints/{id}/stats', { params: { path: { id: endpoint.id }, query: {} } }), [client, endpoint.id]);
  return (
    <section aria-labelledby="activity">
      <h2 id="activity">Last 24 hours</h2>
      {stats.state === 'loading' && <p role="status">Loading activity…</p>}
      {stats.state === 'failed' && <p role="alert">{stats.message}</p>}
      {stats.state === 'ok' && (
        <dl class="panel" data-endpoint-stats>
          <dt>Attempts</dt>
          <dd>{stats.value.attempts}</dd>
          <dt>Succeeded</dt>
          <dd>{stats.value.succeeded}</dd>
          <dt>Failed</dt>
          <dd>{stats.value.failed}</dd>
          <dt>Latency</dt>
          <dd>{stats.value.latencyMs.p50 === null ? '—' : `p50 ${stats.value.latencyMs.p50} ms, p95 ${stats.value.latencyMs.p95 ?? '—'} ms`}</dd>
        </dl>
      )}
      <div class="actions">
        <a href={href('deliveries', '', { endpointId: endpoint.id })}>This endpoint’s deliveries</a>
        <a href={href('deliveries', '', { endpointId: endpoint.id, status: 'dead' })}>Its dead deliveries</a>
        {canManage && <a href={href('replays', '', { endpointId: endpoint.id, status: 'dead' })}>Replay its dead deliveries</a>}
      </div>
    </section>
  );
}

/** The PATCH body: only the fields that changed; '' in a number field means "no value". */
function changes(endpoint: Endpoint, form: FormState) {
  const body: Record<string, unknown> = {};
  const types = parseEventTypes(form.eventTypes);
  if (form.url !== endpoint.url) body.url = form.url;
  if (types.join(',') !== endpoint.eventTypes.join(',')) body.eventTypes = types;
  if (form.description !== (endpoint.description ?? '')) body.description = form.description || null;
  if (Number(form.maxConcurrency) !== endpoint.maxConcurrency) body.maxConcurrency = Number(form.maxConcurrency);
  const rate = form.rateLimitPerSecond === '' ? null : Number(form.rateLimitPerSecond);
  if (rate !== endpoint.rateLimitPerSecond) body.rateLimitPerSecond = rate;
  if (form.ordering !== endpoint.ordering) body.ordering = form.ordering;
  // retryPolicy is replaced whole on PATCH: keep what the form does not show.
  const policy: Record<string, number | undefined> = { ...endpoint.retryPolicy };
  policy.maxAttempts = form.maxAttempts === '' ? undefined : Number(form.maxAttempts);
  policy.baseDelayMs = form.baseDelayMs === '' ? undefined : Number(form.baseDelayMs);
  const cleaned = Object.fromEntries(Object.entries(policy).filter(([, v]) => v !== undefined));
  if (JSON.stringify(cleaned) !== JSON.stringify(endpoint.retryPolicy)) body.retryPolicy = cleaned;
  return body;
}

interface FormState {
  url: string;
  eventTypes: string;
  description: string;
  maxConcurrency: string;
  rateLimitPerSecond: string;
  ordering: Endpoint['ordering'];
  maxAttempts: string;
  baseDelayMs: string;
}

const formOf = (e: Endpoint): FormState => ({
  url: e.url,
  eventTypes: e.eventTypes.join(', '),
  description: e.description ?? '',
  maxConcurrency: String(e.maxConcurrency),
  rateLimitPerSecond: e.rateLimitPerSecond === null ? '' : String(e.rateLimitPerSecond),
  ordering: e.ordering,
  maxAttempts: e.retryPolicy.maxAttempts === undefined ? '' : String(e.retryPolicy.maxAttempts),
  baseDelayMs: e.retryPolicy.baseDelayMs === undefined ? '' : String(e.retryPolicy.baseDelayMs),
});

function Settings({ client, endpoint, onSaved }: { client: Client; endpoint: Endpoint; onSaved: () => void }) {
  const [form, setForm] = useState(() => formOf(endpoint));
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  const set = (field: keyof FormState) => (e: { currentTarget: { value: string } }) => setForm((f) => ({ ...f, [field]: e.currentTarget.value }));
  const policy = endpoint.effectiveRetryPolicy;

  const save = async (e: Event) => {
    e.preventDefault();
    const body = changes(endpoint, form);
    if (Object.keys(body).length === 0) return setOutcome({ kind: 'ok', text: 'Nothing changed.' });
    setBusy(true);
    setOutcome(null);
    const { failure } = await attempt(client.PATCH('/v1/endpoints/{id}', { params: { path: { id: endpoint.id } }, body }));
    setBusy(false);
    setOutcome(failure ? { kind: 'error', text: failure } : { kind: 'ok', text: 'Saved.' });
    if (!failure) onSaved();
  };

  return (
    <form class="panel" onSubmit={save} aria-labelledby="settings">
      <h2 id="settings">Settings</h2>
      <label for="ep-url">URL</label>
      <input id="ep-url" type="url" required value={form.url} onInput={set('url')} />
      <label for="ep-types">Event types</label>
      <input id="ep-types" aria-describedby="ep-types-help" value={form.eventTypes} onInput={set('eventTypes')} />
      <p id="ep-types-help" class="help">Separated by commas or spaces; a prefix ending in .* matches a family. Empty: every type.</p>
      <label for="ep-description">Description</label>
      <input id="ep-description" value={form.description} onInput={set('description')} />
      <div class="fields">
        <div>
          <label for="ep-concurrency">Concurrency</label>
          <input id="ep-concurrency" type="number" min={1} max={1000} required value={form.maxConcurrency} onInput={set('maxConcurrency')} aria-describedby="ep-concurrency-help" />
          <p id="ep-concurrency-help" class="help">Requests in flight at once.</p>
        </div>
        <div>
          <label for="ep-rate">Rate limit per second</label>
          <input id="ep-rate" type="number" min={1} max={100000} value={form.rateLimitPerSecond} onInput={set('rateLimitPerSecond')} aria-describedby="ep-rate-help" />
          <p id="ep-rate-help" class="help">Empty: no limit.</p>
        </div>
        <div>
          <label for="ep-ordering">Ordering</label>
          <select id="ep-ordering" value={form.ordering} onChange={set('ordering')}>
            <option value="none">None: fastest</option>
            <option value="per-message">In order per message</option>
          </select>
        </div>
        <div>
          <label for="ep-max-attempts">Max attempts</label>
          <input id="ep-max-attempts" type="number" min={1} max={100} value={form.maxAttempts} onInput={set('maxAttempts')} aria-describedby="ep-max-attempts-help" />
          <p id="ep-max-attempts-help" class="help">Empty: the platform’s {policy.maxAttempts}.</p>
        </div>
        <div>
          <label for="ep-base-delay">First retry after (ms)</label>
          <input id="ep-base-delay" type="number" min={100} max={86400000} value={form.baseDelayMs} onInput={set('baseDelayMs')} aria-describedby="ep-base-delay-help" />
          <p id="ep-base-delay-help" class="help">Later retries wait longer. Empty: the platform’s {policy.baseDelayMs} ms.</p>
        </div>
      </div>
      <button type="submit" disabled={busy}>{busy ? 'Saving…' : 'Save changes'}</button>
      <div role="status" aria-live="polite">{outcome && <p class={outcome.kind === 'error' ? 'error' : 'ok'}>{outcome.text}</p>}</div>
    </form>
  );
}

/** Pause holds the endpoint's deliveries (nothing sent, nothing given up); resume sends what waited. */
function PauseControl({ client, endpoint, onChanged }: { client: Client; endpoint: Endpoint; onChanged: () => void }) {
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  if (endpoint.status === 'disabled') return null;
  const paused = endpoint.status === 'paused';

  const change = async () => {
    setBusy(true);
    const path = { params: { path: { id: endpoint.id } } };
    const { failure } = await attempt(paused ? client.POST('/v1/endpoints/{id}/resume', path) : client.POST('/v1/endpoints/{id}/pause', path));
    setBusy(false);
    setOutcome(failure ? { kind: 'error', text: failure } : { kind: 'ok', text: paused ? 'Resumed.' : 'Paused.' });
    if (!failure) onChanged();
  };

  return (
    <section aria-labelledby="pause-heading">
      <h2 id="pause-heading">{paused ? 'Resume' : 'Pause'}</h2>
      <p class="help">
        {paused
          ? 'Nothing is sent while it is paused, and new events wait. Resuming sends everything that waited, in order.'
          : 'For a maintenance window: nothing is sent and nothing is given up (except events older than the maximum age); new events wait until you resume.'}
      </p>
      <button type="button" onClick={change} disabled={busy} data-pause-control>{paused ? 'Resume endpoint' : 'Pause endpoint'}</button>
      <div role="status" aria-live="polite">{outcome && <p class={outcome.kind === 'error' ? 'error' : 'ok'}>{outcome.text}</p>}</div>
    </section>
  );
}

function StatusControl({ client, endpoint, onChanged }: { client: Client; endpoint: Endpoint; onChanged: () => void }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [outcome, setOutcome] = useState<Outcome>(null);
  // A paused endpoint can be disabled too; enabling is only for a disabled one.
  const active = endpoint.status !== 'disabled';

  const change = async () => {
    setBusy(true);
    const { failure } = await attempt(client.PATCH('/v1/endpoints/{id}', { params: { path: { id: endpoint.id } }, body: { status: active ? 'disabled' : 'active' } }));
    setBusy(false);
    setConfirming(false);
    setOutcome(failure ? { kind: 'error', text: failure } : { kind: 'ok', text: active ? 'Disabled.' : 'Enabled.' });
    if (!failure) onChanged();
  };

  return (
    <section aria-labelledby="status-heading">
      <h2 id="status-heading">{active ? 'Disable' : 'Enable'}</h2>
      {active ? (
        confirming ? (
          <Confirm title="Disable this endpoint?" confirmLabel="Disable endpoint" busy={busy} onConfirm={change} onCancel={() => setConfirming(false)}>
            <p>While it is disabled nothing is sent to it: its new deliveries are given up on at once (dead, reason endpoint_disabled) and can be replayed after you enable it again.</p>
          </Confirm>
        ) : (
          <button type="button" onClick={() => setConfirming(true)}>Disable…</button>
        )
      ) : (
        <button type="button" onClick={change} disabled={busy}>Enable endpoint</button>
      )}
      <div role="status" aria-live="polite">{outcome && <p class={outcome.kind === 'error' ? 'error' : 'ok'}>{outcome.text}</p>}</div>
    </section>
  );
}

type SecretState =
  | { step: 'idle' }
  | { step: 'confirm'; action: 'reveal' | 'rotate' }
  | { step: 'busy'; action: 'reveal' | 'rotate' }
  | { step: 'shown'; secret: string; publicKey: boolean; previousSecretExpiresAt: string | null; rotated: boolean }
  | { step: 'failed'; message: string };

/**
 * Shows or rotates the signing secret, each after a confirmation. The secret lives only in this
 * component's state: it is gone when the visitor hides it or leaves the page.
 */
function Secret({ client, endpointId }: { client: Client; endpointId: string }) {
  const [state, setState] = useState<SecretState>({ step: 'idle' });
  const [copied, setCopied] = useState('');

  const run = async (action: 'reveal' | 'rotate') => {
    setState({ step: 'busy', action });
    setCopied('');
    const path = { params: { path: { id: endpointId } } };
    const { data, failure } = await attempt(action === 'reveal' ? client.GET('/v1/endpoints/{id}/secret', path) : client.POST('/v1/endpoints/{id}/secret/rotate', path));
    // An ed25519 endpoint answers its public key: the private key never leaves the platform.
    const shown = data?.secret ?? data?.publicKey;
    if (!data || !shown) return setState({ step: 'failed', message: failure ?? 'No secret came back.' });
    setState({ step: 'shown', secret: shown, publicKey: !data.secret, previousSecretExpiresAt: data.previousSecretExpiresAt, rotated: action === 'rotate' });
  };
  const copy = (secret: string) =>
    navigator.clipboard.writeText(secret).then(
      () => setCopied('Copied to the clipboard.'),
      () => setCopied('Copying was not allowed: select the secret and copy it yourself.'),
    );

  return (
    <section aria-labelledby="secret-heading">
      <h2 id="secret-heading">Signing secret</h2>
      <p class="help">Your receiver checks the webhook-signature header with this secret. Anyone who has it can sign requests your receiver will trust.</p>
      {state.step === 'confirm' && state.action === 'reveal' && (
        <Confirm title="Show the signing secret?" confirmLabel="Show secret" onConfirm={() => run('reveal')} onCancel={() => setState({ step: 'idle' })}>
          <p>It will be shown on this screen until you hide it or leave the page. Showing it is recorded in the audit log.</p>
        </Confirm>
      )}
      {state.step === 'confirm' && state.action === 'rotate' && (
        <Confirm title="Rotate the signing secret?" confirmLabel="Rotate secret" danger onConfirm={() => run('rotate')} onCancel={() => setState({ step: 'idle' })}>
          <p>A new secret signs from now on. The current one keeps signing beside it for 24 hours, so your receiver has a day to switch.</p>
        </Confirm>
      )}
      {state.step === 'busy' && <p role="status">{state.action === 'reveal' ? 'Fetching the secret…' : 'Rotating…'}</p>}
      {state.step === 'failed' && <p role="alert" class="error">{state.message}</p>}
      {state.step === 'shown' && (
        <div class="panel secret" aria-live="polite">
          <p>{`${state.rotated ? 'The new' : 'The current'} ${state.publicKey ? 'public key (Ed25519) your receiver verifies with' : 'signing secret'}:`}</p>
          <p><code data-secret>{state.secret}</code></p>
          {state.previousSecretExpiresAt && <p data-previous-secret>The previous secret keeps signing beside it until {formatTime(state.previousSecretExpiresAt)}.</p>}
          <div class="actions">
            <button type="button" onClick={() => copy(state.secret)}>Copy secret</button>
            <button type="button" class="secondary" onClick={() => setState({ step: 'idle' })}>Hide secret</button>
          </div>
          <p aria-live="polite">{copied}</p>
        </div>
      )}
      {(state.step === 'idle' || state.step === 'shown' || state.step === 'failed') && (
        <div class="actions">
          {state.step !== 'shown' && <button type="button" onClick={() => setState({ step: 'confirm', action: 'reveal' })}>Show secret…</button>}
          <button type="button" onClick={() => setState({ step: 'confirm', action: 'rotate' })}>Rotate secret…</button>
        </div>
      )}
    </section>
  );
}

function Delete({ client, endpointId }: { client: Client; endpointId: string }) {
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState('');

  const remove = async () => {
    setBusy(true);
    const result = await attempt(client.DELETE('/v1/endpoints/{id}', { params: { path: { id: endpointId } } }));
    setBusy(false);
    if (result.failure) return setFailure(result.failure);
    location.hash = href('endpoints');
  };

  return (
    <section aria-labelledby="delete-heading">
      <h2 id="delete-heading">Delete</h2>
      {confirming ? (
        <Confirm title="Delete this endpoint?" confirmLabel="Delete endpoint" danger busy={busy} onConfirm={remove} onCancel={() => setConfirming(false)}>
          <p>Nothing more is sent to it, and its waiting deliveries are given up on. This cannot be undone.</p>
        </Confirm>
      ) : (
        <button type="button" onClick={() => setConfirming(true)}>Delete…</button>
      )}
      {failure && <p role="alert" class="error">{failure}</p>}
    </section>
  );
}
