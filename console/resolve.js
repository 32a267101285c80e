// An operator's decision on a payout in MANUAL_REVIEW (POST /admin/intents/{id}/resolve).
import { useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorNote, withValue } from './format.js';
import { html } from './html.js';

/** @typedef {import('./api.js').ResolveAnswer} ResolveAnswer */

/** @param {ResolveAnswer} answer */
function outcomeText(answer) {
  if (answer.queuedJob === null) return `Nothing changed: the intent is already ${answer.status}.`;
  if (answer.resolution === 'CONFIRMED') return 'CONFIRMED: settlement queued; the intent settles when the outbox posts it.';
  return 'FAILED: the intent failed; release of the reservation queued.';
}

/** @param {{ intent: import('./api.js').AdminIntent, onResolved?: (answer: ResolveAnswer) => void }} props */
export function ResolveForm({ intent, onResolved }) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [answer, setAnswer] = useState(/** @type {ResolveAnswer | null} */ (null));
  const reasonId = `reason-${intent.intentId}`;

  /** @param {ResolveAnswer['resolution']} resolution */
  const resolve = async (resolution) => {
    const trimmed = reason.trim();
    // The API would default the reason; operators must say why a payout failed, for the customer and the audit.
    if (resolution === 'FAILED' && trimmed === '') {
      setError(new Error('Give a reason to resolve FAILED.'));
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const body = { resolution, ...(trimmed === '' ? {} : { reason: trimmed }) };
      /** @type {ResolveAnswer} */
      const result = await api(`/admin/intents/${intent.intentId}/resolve`, { method: 'POST', body });
      setAnswer(result);
      onResolved?.(result);
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };

  return html`
    <form class="resolve" aria-label=${`Resolve intent ${intent.intentId}`} onSubmit=${(/** @type {SubmitEvent} */ e) => e.preventDefault()}>
      <label for=${reasonId}>Reason</label>
      <input id=${reasonId} value=${reason} maxLength="500" onInput=${withValue(setReason)} />
      <button type="button" disabled=${busy} onClick=${() => resolve('CONFIRMED')}>Resolve CONFIRMED</button>
      <button type="button" class="danger" disabled=${busy} onClick=${() => resolve('FAILED')}>Resolve FAILED</button>
      ${answer ? html`<p class="outcome" role="status">${outcomeText(answer)} <a href=${`#/intents/${answer.intentId}`}>Open intent</a></p>` : null}
      <${ErrorNote} error=${error} />
    </form>`;
}
