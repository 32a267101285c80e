// Account look-up: balance and recent history of one ledger account (GET /admin/accounts/{name}),
// and for an account a user owns its statement over a range, shown or downloaded as csv or camt.053
// (GET /admin/accounts/{name}/statement, docs/rules.md R58).
import { useEffect, useState } from 'preact/hooks';
import { api, apiFile, queryString } from './api.js';
import { ErrorNote, intentLink, money, time, withValue } from './format.js';
import { html } from './html.js';

/** @typedef {import('./api.js').AdminAccount} AdminAccount */
/** @typedef {import('./api.js').AccountStatement} AccountStatement */

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
    ${account.transactions.length === 0 ? html`<p class="empty">No transactions.</p>` : null}
    ${account.userId === null ? null : html`<${StatementView} account=${account} />`}`;
}

/** A datetime-local value (the browser's zone) as ISO 8601 with an offset: UTC. */
const instant = (/** @type {string} */ local) => new Date(local).toISOString();
/** @param {Date} date */
const localValue = (date) => new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

/** @param {{ account: AdminAccount }} props */
function StatementView({ account }) {
  const now = new Date();
  const [from, setFrom] = useState(localValue(new Date(now.getFullYear(), now.getMonth(), 1)));
  const [to, setTo] = useState(localValue(now));
  const [statement, setStatement] = useState(/** @type {AccountStatement | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const path = (/** @type {string} */ format) =>
    `/admin/accounts/${encodeURIComponent(account.accountName)}/statement${queryString({ from: instant(from), to: instant(to), format })}`;

  /** @param {SubmitEvent} event */
  const show = (event) => {
    event.preventDefault();
    setError(null);
    /** @type {Promise<AccountStatement>} */ (api(path('json'))).then(setStatement, setError);
  };
  /** @param {'csv' | 'camt053'} format */
  const download = (format) => {
    setError(null);
    apiFile(path(format)).then((blob) => {
      const link = document.createElement('a');
      link.href = URL.createObjectURL(blob);
      link.download = `statement-${account.accountName}.${format === 'csv' ? 'csv' : 'xml'}`;
      link.click();
      URL.revokeObjectURL(link.href);
    }, setError);
  };

  return html`
    <h3>Statement</h3>
    <form class="filters" onSubmit=${show} aria-label="Statement">
      <div class="field"><label for="statement-from">From</label><input id="statement-from" type="datetime-local" required value=${from} onInput=${withValue(setFrom)} /></div>
      <div class="field"><label for="statement-to">To</label><input id="statement-to" type="datetime-local" required value=${to} onInput=${withValue(setTo)} /></div>
      <div class="actions">
        <button type="submit">Show</button>
        <button type="button" onClick=${() => download('csv')}>Download csv</button>
        <button type="button" onClick=${() => download('camt053')}>Download camt.053</button>
      </div>
    </form>
    <${ErrorNote} error=${error} />
    ${
      statement === null
        ? null
        : html`
      <dl class="facts">
        <dt>Opening balance</dt><dd id="statement-opening">${money(statement.openingBalance, statement.currency)}</dd>
        <dt>Closing balance</dt><dd id="statement-closing">${money(statement.closingBalance, statement.currency)}</dd>
      </dl>
      <table>
        <caption>Postings, oldest first</caption>
        <thead><tr><th scope="col">Time</th><th scope="col">Intent</th><th scope="col">Type</th><th scope="col">Direction</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Fee</th><th scope="col" class="num">Balance after</th></tr></thead>
        <tbody>
          ${statement.entries.map(
            (entry) => html`
            <tr key=${entry.at}>
              <td>${time(entry.at)}</td><td>${entry.intentId === null ? '—' : intentLink(entry.intentId)}</td><td>${entry.operationType ?? '—'}</td>
              <td>${entry.direction}</td><td class="num">${money(entry.amount, statement.currency)}</td><td class="num">${money(entry.feeAmount, statement.currency)}</td>
              <td class="num">${money(entry.balanceAfter, statement.currency)}</td>
            </tr>`,
          )}
        </tbody>
      </table>`
    }`;
}
