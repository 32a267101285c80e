// An intent's refunds (docs/rules.md R57), read through the admin API like the rest of the page.
import { useRead } from './api.js';
import { ErrorNote, money, time } from './format.js';
import { html } from './html.js';

/** @param {{ intent: import('./api.js').AdminIntent }} props */
export function IntentRefunds({ intent }) {
  const { intentId, currency } = intent;
  // Read again whenever the intent is (Refresh, or the poll of a moving intent): a refund changes nothing on the intent itself.
  const { answer, error } = /** @type {{ answer: import('./api.js').AdminRefunds | null, error: unknown }} */ (
    useRead(`/admin/intents/${encodeURIComponent(intentId)}/refunds`, intent)
  );
  return html`
    <section aria-label="Refunds">
      <h3>Refunds</h3>
      <${ErrorNote} error=${error} />
      ${
        answer === null
          ? null
          : html`
        <p>Refunded: <strong id="refunded-amount">${money(answer.refundedAmount, currency)}</strong></p>
        ${
          answer.refunds.length === 0
            ? html`<p class="empty">No refunds.</p>`
            : html`
          <table class="refunds">
            <caption>Refunds, oldest first</caption>
            <thead><tr><th scope="col">Created</th><th scope="col">Refund</th><th scope="col">Status</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Fee</th><th scope="col">Reason</th><th scope="col">Failure</th></tr></thead>
            <tbody>
              ${answer.refunds.map(
                (refund) => html`
                <tr key=${refund.refundId} data-refund-id=${refund.refundId}>
                  <td>${time(refund.createdAt)}</td><td><code class="id">${refund.refundId}</code></td><td>${refund.status}</td>
                  <td class="num">${money(refund.amount, refund.currency)}</td><td class="num">${money(refund.feeAmount, refund.currency)}</td>
                  <td>${refund.reason}</td><td>${refund.failureReason ?? ''}</td>
                </tr>`,
              )}
            </tbody>
          </table>`
        }`
      }
    </section>`;
}
