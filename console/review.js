// The MANUAL_REVIEW queue: payouts whose provider outcome stayed unknown, waiting for an operator.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorNote } from './format.js';
import { html } from './html.js';
import { IntentTable } from './intents.js';
import { ResolveForm } from './resolve.js';

/** The API's page maximum; a longer queue is an incident, and the intents list pages through it. */
const QUEUE_SIZE_MAX = 100;

/** @typedef {import('./api.js').AdminIntent} AdminIntent */

export function ReviewQueue() {
  const [intents, setIntents] = useState(/** @type {readonly AdminIntent[] | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const load = useCallback(async () => {
    try {
      /** @type {import('./api.js').IntentPage} */
      const page = await api(`/admin/intents?status=MANUAL_REVIEW&limit=${QUEUE_SIZE_MAX}`);
      setIntents(page.intents);
      setError(null);
    } catch (caught) {
      setError(caught);
    }
  }, []);
  useEffect(() => void load(), [load]);

  // A CONFIRMED intent stays in MANUAL_REVIEW until the outbox posts it, so its row (and the
  // outcome shown in it) stays until the operator reloads the queue.
  return html`
    <h2>Manual review</h2>
    <p class="hint">
      CONFIRMED settles the payout (the provider paid); FAILED releases the customer's reservation (it did not).
      Check the provider's records first: the escalation data is in the intent's audit timeline.
    </p>
    <p><button type="button" class="secondary" onClick=${load}>Reload queue</button></p>
    <${ErrorNote} error=${error} />
    ${
      intents === null
        ? html`<p>Loading…</p>`
        : html`<${IntentTable} intents=${intents} caption="Intents in MANUAL_REVIEW, newest first" actions=${(/** @type {AdminIntent} */ intent) => html`<${ResolveForm} intent=${intent} />`} />`
    }`;
}
