// The invariant audit (GET /admin/audit): ledger and intents agree, or the list of what does not.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { ErrorNote, intentLink, time } from './format.js';
import { html } from './html.js';

/** @typedef {import('./api.js').AuditAnswer} AuditAnswer */

export function AuditStatus() {
  const [result, setResult] = useState(/** @type {AuditAnswer | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  const run = useCallback(async () => {
    setBusy(true);
    try {
      setResult(await /** @type {Promise<AuditAnswer>} */ (api('/admin/audit')));
      setError(null);
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  }, []);
  useEffect(() => void run(), [run]);

  return html`
    <h2>Invariant audit</h2>
    <p><button type="button" onClick=${run} disabled=${busy}>${busy ? 'Running…' : 'Run audit again'}</button></p>
    <${ErrorNote} error=${error} />
    ${result ? html`<${AuditResult} result=${result} />` : null}`;
}

/** @param {{ result: AuditAnswer }} props */
function AuditResult({ result }) {
  const summary = result.ok ? 'All invariants hold' : `${result.violations.length} violation(s) found`;
  return html`
    <p role="status" class=${result.ok ? 'ok' : 'error'}><strong>${summary}</strong> (checked ${time(result.checkedAt)})</p>
    ${
      result.ok
        ? null
        : html`
        <table>
          <caption>Violations</caption>
          <thead><tr><th scope="col">Check</th><th scope="col">Intent</th><th scope="col">Account</th><th scope="col">Detail</th></tr></thead>
          <tbody>
            ${result.violations.map(
              (v, index) => html`
              <tr key=${index}>
                <td>${v.check}</td><td>${v.intentId ? intentLink(v.intentId) : '—'}</td><td>${v.account ?? '—'}</td><td>${v.detail}</td>
              </tr>`,
            )}
          </tbody>
        </table>`
    }`;
}
