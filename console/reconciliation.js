// Reconciliation runs with the provider (docs/rules.md R59): the latest runs, and one run with its breaks.
import { useRead } from './api.js';
import { ErrorNote, intentLink, money, time } from './format.js';
import { html } from './html.js';

/** @typedef {import('./api.js').ReconciliationRunSummary} RunSummary */

/** @param {{ run: RunSummary }} props */
const runLink = ({ run }) => html`<a href=${`#/reconciliation/${run.runId}`}><code class="id">${run.runId}</code></a>`;

/** @param {{ runId: string | null }} props */
export function Reconciliation({ runId }) {
  return runId === null ? html`<${RunList} />` : html`<${RunDetail} runId=${runId} />`;
}

function RunList() {
  const { answer, error } = /** @type {{ answer: { runs: readonly RunSummary[] } | null, error: unknown }} */ (
    useRead('/admin/reconciliation/runs?limit=100')
  );
  return html`
    <h2>Reconciliation runs</h2>
    <${ErrorNote} error=${error} />
    ${
      answer === null
        ? error
          ? null
          : html`<p>Loading…</p>`
        : html`
      <table>
        <caption>The latest runs, newest first</caption>
        <thead><tr><th scope="col">Date</th><th scope="col">Run</th><th scope="col">Status</th><th scope="col">Started</th><th scope="col">By</th><th scope="col" class="num">Lines</th><th scope="col" class="num">Matched</th><th scope="col" class="num">Breaks</th></tr></thead>
        <tbody>
          ${answer.runs.map(
            (run) => html`
            <tr key=${run.runId} data-run-id=${run.runId}>
              <td>${run.date}</td><td><${runLink} run=${run} /></td><td>${run.status}</td><td>${time(run.startedAt)}</td>
              <td>${run.requestedBy}</td><td class="num">${run.lineCount}</td><td class="num">${run.matched}</td><td class="num">${run.breakCount}</td>
            </tr>`,
          )}
        </tbody>
      </table>
      ${answer.runs.length === 0 ? html`<p class="empty">No reconciliation runs yet.</p>` : null}`
    }`;
}

/** @param {{ runId: string }} props */
function RunDetail({ runId }) {
  const { answer: run, error } = /** @type {{ answer: import('./api.js').ReconciliationRun | null, error: unknown }} */ (
    useRead(`/admin/reconciliation/runs/${encodeURIComponent(runId)}`)
  );
  if (run === null) return html`<h2>Reconciliation run</h2><${ErrorNote} error=${error} />${error ? null : html`<p>Loading…</p>`}`;
  const facts = [
    ['Statement date', run.date],
    ['Status', run.status],
    ['Requested by', run.requestedBy],
    ['Started / finished', `${time(run.startedAt)} / ${time(run.finishedAt) || '—'}`],
    ['Lines / matched / resolved', `${run.lineCount} / ${run.matched} / ${run.resolved}`],
    ['Opening / closing balance', `${money(run.openingBalance) || '—'} / ${money(run.closingBalance) || '—'}`],
    ['Provider / nostro movement', `${money(run.providerMovement) || '—'} / ${money(run.nostroMovement) || '—'}`],
  ];
  return html`
    <h2>Reconciliation run <code class="id">${run.runId}</code></h2>
    <dl class="facts">${facts.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>
    <table class="breaks">
      <caption>Breaks (${run.breakCount}), in the order found${run.nextBreaksAfter === null ? '' : '; the first page only'}</caption>
      <thead><tr><th scope="col">Kind</th><th scope="col">Intent</th><th scope="col">Statement line</th><th scope="col" class="num">Here</th><th scope="col" class="num">At provider</th></tr></thead>
      <tbody>
        ${run.breaks.map(
          (item, index) => html`
          <tr key=${index}>
            <td>${item.kind}</td><td>${item.intentId === null ? '—' : intentLink(item.intentId)}</td><td>${item.lineId ?? '—'}</td>
            <td class="num">${money(item.amountHere)}</td><td class="num">${money(item.amountAtProvider)}</td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${run.breaks.length === 0 ? html`<p class="empty">No breaks.</p>` : null}
    <p><a href="#/reconciliation">All runs</a></p>`;
}
