// The intents list (filters, cursor paging) and one intent with its audit timeline.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api, queryString } from './api.js';
import { accountLink, ErrorNote, intentLink, isFinal, money, statusBadge, time, withValue } from './format.js';
import { html } from './html.js';
import { CHANNELS, INTENT_STATUSES, OPERATION_TYPES } from './model.js';
import { IntentRefunds } from './refunds.js';
import { ResolveForm } from './resolve.js';

/** @typedef {import('./api.js').AdminIntent} AdminIntent */
/** @typedef {import('./api.js').AdminIntentWithEvents} AdminIntentWithEvents */
/** @typedef {typeof EMPTY_FILTERS} IntentFilters */

const PAGE_SIZE = 50;
/**
 * How often an open intent that is still moving is re-read. Polling, not the SSE stream: status
 * messages are published for `live` intents only and carry no PSP sub-states, while the timeline
 * must show every audit row of every intent.
 */
const POLL_INTERVAL_MS = 2000;

const EMPTY_FILTERS = { status: '', operationType: '', channel: '', serviceId: '', createdFrom: '', createdTo: '' };

/**
 * datetime-local gives local wall time without a zone; the API wants ISO 8601.
 * @param {string} local
 */
const isoOf = (local) => (local === '' ? '' : new Date(local).toISOString());

/** @param {{ id: string, label: string, options: readonly string[], value: string, onChange: (value: string) => void }} props */
function Select({ id, label, options, value, onChange }) {
  return html`
    <div class="field">
      <label for=${id}>${label}</label>
      <select id=${id} value=${value} onChange=${withValue(onChange)}>
        <option value="">any</option>
        ${options.map((option) => html`<option value=${option}>${option}</option>`)}
      </select>
    </div>`;
}

/** @param {{ initial: IntentFilters, onApply: (filters: IntentFilters) => void }} props */
function Filters({ initial, onApply }) {
  const [draft, setDraft] = useState(initial);
  /** @param {keyof IntentFilters} name */
  const set = (name) => (/** @type {string} */ value) => setDraft({ ...draft, [name]: value });
  /** @param {SubmitEvent} event */
  const submit = (event) => {
    event.preventDefault();
    onApply(draft);
  };
  const clear = () => {
    setDraft(EMPTY_FILTERS);
    onApply(EMPTY_FILTERS);
  };
  return html`
    <form class="filters" onSubmit=${submit} aria-label="Intent filters">
      <${Select} id="f-status" label="Status" options=${INTENT_STATUSES} value=${draft.status} onChange=${set('status')} />
      <${Select} id="f-type" label="Operation type" options=${OPERATION_TYPES} value=${draft.operationType} onChange=${set('operationType')} />
      <${Select} id="f-channel" label="Channel" options=${CHANNELS} value=${draft.channel} onChange=${set('channel')} />
      <div class="field">
        <label for="f-service">Service id</label>
        <input id="f-service" value=${draft.serviceId} onInput=${withValue(set('serviceId'))} />
      </div>
      <div class="field">
        <label for="f-from">Created from (local time)</label>
        <input id="f-from" type="datetime-local" value=${draft.createdFrom} onInput=${withValue(set('createdFrom'))} />
      </div>
      <div class="field">
        <label for="f-to">Created before (local time)</label>
        <input id="f-to" type="datetime-local" value=${draft.createdTo} onInput=${withValue(set('createdTo'))} />
      </div>
      <div class="actions">
        <button type="submit">Apply filters</button>
        <button type="button" class="secondary" onClick=${clear}>Clear</button>
      </div>
    </form>`;
}

/** @param {{ intents: readonly AdminIntent[], caption: string, actions?: (intent: AdminIntent) => unknown }} props */
export function IntentTable({ intents, caption, actions }) {
  return html`
    <table>
      <caption>${caption}</caption>
      <thead>
        <tr>
          <th scope="col">Created</th><th scope="col">Intent</th><th scope="col">Service</th><th scope="col">Type</th>
          <th scope="col">Channel</th><th scope="col">Status</th><th scope="col" class="num">Amount</th>
          <th scope="col">From</th><th scope="col">To</th>${actions ? html`<th scope="col">Actions</th>` : null}
        </tr>
      </thead>
      <tbody>
        ${intents.map(
          (intent) => html`
          <tr key=${intent.intentId} data-intent-id=${intent.intentId}>
            <td>${time(intent.createdAt)}</td><td>${intentLink(intent.intentId)}</td><td>${intent.serviceId}</td>
            <td>${intent.operationType}</td><td>${intent.channel}</td><td>${statusBadge(intent.status)}</td>
            <td class="num">${money(intent.amount, intent.currency)}</td>
            <td>${accountLink(intent.fromAccount)}</td><td>${accountLink(intent.toAccount)}</td>
            ${actions ? html`<td>${actions(intent)}</td>` : null}
          </tr>`,
        )}
      </tbody>
    </table>
    ${intents.length === 0 ? html`<p class="empty">No intents.</p>` : null}`;
}

export function IntentList() {
  const [filters, setFilters] = useState(EMPTY_FILTERS);
  const [intents, setIntents] = useState(/** @type {readonly AdminIntent[]} */ ([]));
  const [nextCursor, setNextCursor] = useState(/** @type {string | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [loading, setLoading] = useState(false);

  const load = useCallback(
    async (/** @type {string | undefined} */ cursor) => {
      setLoading(true);
      setError(null);
      try {
        const query = {
          ...filters,
          createdFrom: isoOf(filters.createdFrom),
          createdTo: isoOf(filters.createdTo),
          limit: PAGE_SIZE,
          cursor,
        };
        /** @type {import('./api.js').IntentPage} */
        const page = await api(`/admin/intents${queryString(query)}`);
        setIntents((shown) => (cursor === undefined ? page.intents : [...shown, ...page.intents]));
        setNextCursor(page.nextCursor);
      } catch (caught) {
        setError(caught);
      } finally {
        setLoading(false);
      }
    },
    [filters],
  );
  useEffect(() => void load(undefined), [load]);

  return html`
    <h2>Intents</h2>
    <${Filters} initial=${filters} onApply=${setFilters} />
    <${ErrorNote} error=${error} />
    <${IntentTable} intents=${intents} caption="Intents of every service, newest first" />
    <p class="actions" aria-live="polite">
      ${loading ? 'Loading…' : null}
      ${nextCursor && !loading ? html`<button type="button" onClick=${() => load(nextCursor)}>Load more</button>` : null}
    </p>`;
}

/**
 * Re-reads the intent until its status is final; the timeline grows as the workers move it.
 * @param {string} id
 */
function useIntent(id) {
  const [intent, setIntent] = useState(/** @type {AdminIntentWithEvents | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const reload = useCallback(async () => {
    try {
      setIntent(await /** @type {Promise<AdminIntentWithEvents>} */ (api(`/admin/intents/${encodeURIComponent(id)}`)));
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }, [id]);
  useEffect(() => {
    setIntent(null);
    void reload();
  }, [reload]);
  const moving = intent !== null && !isFinal(intent.status);
  useEffect(() => {
    if (!moving) return undefined;
    const timer = setInterval(() => void reload(), POLL_INTERVAL_MS);
    return () => clearInterval(timer);
  }, [moving, reload]);
  return { intent, error, reload, moving };
}

/** @param {{ intent: AdminIntent }} props */
function Facts({ intent }) {
  const facts = [
    ['Intent id', html`<code>${intent.intentId}</code>`],
    ['Service', intent.serviceId],
    ['Operation type', intent.operationType],
    ['Channel', intent.channel],
    ['PSP state', intent.pspState ?? '—'],
    ['Amount', money(intent.amount, intent.currency)],
    ['Fee before / after', `${money(intent.preFeeAmount, intent.currency)} / ${money(intent.postFeeAmount, intent.currency)}`],
    ['From', accountLink(intent.fromAccount)],
    ['To', accountLink(intent.toAccount)],
    ['External reference', intent.externalRef ?? '—'],
    ['Failure reason', intent.failureReason ?? '—'],
    ['Settlement date', intent.settlementDate ?? '—'],
    ['Created', time(intent.createdAt)],
    ['Updated', `${time(intent.updatedAt)} (version ${intent.version})`],
  ];
  return html`<dl class="facts">${facts.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>`;
}

/** @param {{ events: readonly import('./api.js').AdminIntentEvent[] }} props */
function Timeline({ events }) {
  return html`
    <table class="timeline">
      <caption>Audit timeline, oldest first</caption>
      <thead><tr><th scope="col">Time</th><th scope="col">From</th><th scope="col">To</th><th scope="col">Reason</th><th scope="col">Details</th></tr></thead>
      <tbody>
        ${events.map(
          (event) => html`
          <tr key=${event.id}>
            <td>${time(event.createdAt)}</td><td>${event.statusFrom ?? '—'}</td><td>${event.statusTo}</td>
            <td>${event.reason ?? ''}</td>
            <td>${event.payload ? html`<details><summary>payload</summary><pre>${JSON.stringify(event.payload, null, 2)}</pre></details>` : ''}</td>
          </tr>`,
        )}
      </tbody>
    </table>`;
}

/** @param {{ id: string }} props */
export function IntentDetail({ id }) {
  const { intent, error, reload, moving } = useIntent(id);
  if (intent === null) return html`<h2>Intent</h2><${ErrorNote} error=${error} />${error ? null : html`<p>Loading…</p>`}`;
  return html`
    <h2>Intent <code>${intent.intentId}</code></h2>
    <p class="status-line">
      Status: <strong id="intent-status" aria-live="polite">${intent.status}</strong>
      <span class="hint">${moving ? ` — refreshing every ${POLL_INTERVAL_MS / 1000} s` : ' — final'}</span>
      <button type="button" class="secondary" onClick=${reload}>Refresh</button>
    </p>
    <${ErrorNote} error=${error} />
    ${intent.status === 'MANUAL_REVIEW' ? html`<section aria-label="Resolve"><h3>Resolve</h3><${ResolveForm} intent=${intent} onResolved=${reload} /></section>` : null}
    <${Facts} intent=${intent} />
    <${IntentRefunds} intent=${intent} />
    <${Timeline} events=${intent.events} />
    <details><summary>Metadata</summary><pre>${JSON.stringify(intent.metadata, null, 2)}</pre></details>`;
}
