// Account look-up: balance and recent history of one ledger account (GET /admin/accounts/{name}).
import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorNote, intentLink, money, time, withValue } from './format.js';
import { html } from './html.js';

/** @typedef {import('./api.js').AdminAccount} AdminAccount */

/** @param {{ name: string | null }} props */
export function AccountLookup({ name }) {
  const [draft, setDraft] = useState(name ?? '');
  const [account, setAccount] = useState(/** @type {AdminAccount | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));

  useEffect(() => {
    setDraft(name ?? '');
    setAccount(null);
    setError(null);
    if (name === null) return;
    /** @type {Promise<AdminAccount>} */ (api(`/admin/accounts/${encodeURIComponent(name)}`)).then(setAccount, setError);
  }, [name]);

  // The name goes into the hash, so a look-up can be bookmarked and intent pages can link to it.
  /** @param {SubmitEvent} event */
  const submit = (event) => {
    event.preventDefault();
    location.hash = `#/accounts/${encodeURIComponent(draft.trim())}`;
  };

  return html`
    <h2>Accounts</h2>
    <form class="filters" onSubmit=${submit} aria-label="Account look-up">
      <div class="field">
        <label for="account-name">Account name or ledger id</label>
        <input id="account-name" required placeholder="user.42.THB" value=${draft} onInput=${withValue(setDraft)} />
      </div>
      <div class="actions"><button type="submit">Look up</button></div>
    </form>
    <${ErrorNote} error=${error} />
    ${account ? html`<${Account} account=${account} />` : null}`;
}

/** @param {{ account: AdminAccount }} props */
function Account({ account }) {
  return html`
    <dl class="facts">
      <dt>Account</dt><dd><code>${account.accountName}</code></dd>
      <dt>Type</dt><dd>${account.accountType}</dd>
      <dt>User id</dt><dd>${account.userId ?? '—'}</dd>
      <dt>Balance</dt><dd id="account-balance"><strong>${money(account.balance, account.currency)}</strong></dd>
    </dl>
    <table>
      <caption>Recent history, newest first</caption>
      <thead><tr><th scope="col">Time</th><th scope="col">Intent</th><th scope="col">Type</th><th scope="col">Direction</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Fee</th></tr></thead>
      <tbody>
        ${account.transactions.map(
          (row) => html`
          <tr key=${row.id}>
            <td>${time(row.createdAt)}</td><td>${intentLink(row.intentId)}</td><td>${row.operationType}</td>
            <td>${row.direction}</td><td class="num">${money(row.amount, row.currency)}</td><td class="num">${money(row.feeAmount, row.currency)}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${account.transactions.length === 0 ? html`<p class="empty">No transactions.</p>` : null}`;
}
