// Dead webhooks: events a receiver never acknowledged within the 72 h retry window. The operator
// fixes the receiver, then redelivers; the later events of the same intent follow on their own.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorNote, intentLink, time } from './format.js';
import { html } from './html.js';

/** The API's page maximum; more dead webhooks than this is an incident, and the CLI pages through them. */
const LIST_SIZE_MAX = 500;

/** @typedef {import('./api.js').DeadWebhook} DeadWebhook */

/** @param {{ delivery: DeadWebhook }} props */
function RedeliverButton({ delivery }) {
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(false);
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const redeliver = async () => {
    setBusy(true);
    setError(null);
    try {
      await api(`/admin/webhooks/dead/${encodeURIComponent(delivery.cursor)}/redeliver`, { method: 'POST' });
      setDone(true);
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <button type="button" disabled=${busy || done} onClick=${redeliver}>Redeliver</button>
    ${done ? html`<p class="outcome" role="status">Redelivery scheduled: attempted again now, with a fresh window.</p>` : null}
    <${ErrorNote} error=${error} />`;
}

export function DeadWebhooks() {
  const [dead, setDead] = useState(/** @type {readonly DeadWebhook[] | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      /** @type {{ deadWebhooks: DeadWebhook[] }} */
      const page = await api(`/admin/webhooks/dead?limit=${LIST_SIZE_MAX}`);
      setDead(page.deadWebhooks);
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }, []);
  useEffect(() => void load(), [load]);

  return html`
    <h2>Dead webhooks</h2>
    <p class="hint">
      A dead webhook also holds back the later events of its intent (column "Held back"), so that a receiver never sees them out of order.
      Fix the receiver first: a redelivery starts a new 72 h window.
    </p>
    <p><button type="button" class="secondary" onClick=${load}>Reload</button></p>
    <${ErrorNote} error=${error} />
    ${
      dead === null
        ? html`<p>Loading…</p>`
        : html`
          <table>
            <caption>Dead webhooks, oldest first</caption>
            <thead><tr><th scope="col">Service</th><th scope="col">Intent</th><th scope="col">Change</th><th scope="col" class="num">Attempts</th><th scope="col">Last answer</th><th scope="col">Dead since</th><th scope="col" class="num">Held back</th><th scope="col">Action</th></tr></thead>
            <tbody>
              ${dead.map(
                (d) => html`
                <tr data-cursor=${d.cursor}>
                  <td>${d.serviceId}</td>
                  <td>${intentLink(d.intentId)}</td>
                  <td>${changeOf(d.event)}</td>
                  <td class="num">${d.attempts}</td>
                  <td>${d.lastOutcome}${d.lastHttpStatus === null ? '' : ` ${d.lastHttpStatus}`}</td>
                  <td>${time(d.deadAt)}</td>
                  <td class="num">${d.heldBack}</td>
                  <td><${RedeliverButton} delivery=${d} /></td>
                </tr>`,
              )}
            </tbody>
          </table>`
    }`;
}

/** @param {unknown} event */
function changeOf(event) {
  const { statusFrom, statusTo } = /** @type {{ statusFrom?: string | null, statusTo?: string }} */ (event ?? {});
  return `${statusFrom ?? '∅'} → ${statusTo ?? '?'}`;
}
