// Reconciliation runs with the provider (docs/rules.md R59): the latest runs, a run started for a
// date, and one run with its breaks, a page at a time.
import { useState } from 'preact/hooks';
import { api, queryString, useRead } from './api.js';
import { ErrorNote, intentLink, money, time, withValue } from './format.js';
import { html } from './html.js';

/** Breaks per page: a day with a million breaks is read page by page, with the API's own `after`. */
const BREAKS_PAGE_SIZE = 50;

const bangkokDay = new Intl.DateTimeFormat('en-CA', { timeZone: 'Asia/Bangkok', year: 'numeric', month: '2-digit', day: '2-digit' });
/** Yesterday in Bangkok as YYYY-MM-DD: the day the daily run reconciles, and the usual one to run again. */
const yesterdayInBangkok = () => bangkokDay.format(new Date(Date.now() - 24 * 3600 * 1000));

/** @typedef {import('./api.js').ReconciliationRunSummary} RunSummary */

/** @param {{ run: RunSummary }} props */
const runLink = ({ run }) => html`<a href=${`#/reconciliation/${run.runId}`}><code class="id">${run.runId}</code></a>`;

/** @param {{ runId: string | null }} props */
export function Reconciliation({ runId }) {
  // Keyed by the run: another run starts on its first page of breaks.
  return runId === null ? html`<${RunList} />` : html`<${RunDetail} key=${runId} runId=${runId} />`;
}

/**
 * POST /admin/reconciliation/runs for one date; the run's page is opened when it is done. A run
 * of a busy day reads a large statement, so the button stays disabled until the answer.
 */
function RunForDate() {
  const [date, setDate] = useState(yesterdayInBangkok);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(/** @type {unknown} */ (null));
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      /** @type {import('./api.js').ReconciliationRun} */
      const run = await api('/admin/reconciliation/runs', { method: 'POST', body: { date: date.replaceAll('-', '') } });
      location.hash = `#/reconciliation/${run.runId}`;
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <form class="filters" onSubmit=${submit} aria-label="Run for date">
      <div class="field">
        <label for="run-date">Statement date (Bangkok)</label>
        <input id="run-date" type="date" required value=${date} onInput=${withValue(setDate)} />
      </div>
      <button type="submit" disabled=${busy}>${busy ? 'Running…' : 'Run reconciliation'}</button>
    </form>
    <${ErrorNote} error=${error} />`;
}

function RunList() {
  const { answer, error } = /** @type {{ answer: { runs: readonly RunSummary[] } | null, error: unknown }} */ (
    useRead('/admin/reconciliation/runs?limit=100')
  );
  return html`
    <h2>Reconciliation runs</h2>
    <${RunForDate} />
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
  // The `after` of every page before the one asked for: the last is its own, popping it goes back.
  const [afters, setAfters] = useState(/** @type {readonly string[]} */ ([]));
  const path = `/admin/reconciliation/runs/${encodeURIComponent(runId)}${queryString({ limit: BREAKS_PAGE_SIZE, after: afters.at(-1) })}`;
  const {
    answer: run,
    error,
    answeredPath,
  } = /** @type {{ answer: import('./api.js').ReconciliationRun | null, error: unknown, answeredPath: string | null }} */ (useRead(path));
  // The page shown is the previous one until the asked one arrives: its numbers and buttons wait for it.
  const loading = answeredPath !== path;
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
  const first = afters.length * BREAKS_PAGE_SIZE + 1;
  const shown = loading ? 'loading…' : run.breaks.length === 0 ? 'none' : `${first}–${first + run.breaks.length - 1}`;
  const next = run.nextBreaksAfter;
  return html`
    <h2>Reconciliation run <code class="id">${run.runId}</code></h2>
    <dl class="facts">${facts.map(([term, value]) => html`<dt>${term}</dt><dd>${value}</dd>`)}</dl>
    <table class="breaks">
      <caption>Breaks (${run.breakCount}), in the order found: ${shown}</caption>
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
    ${run.breaks.length === 0 && afters.length === 0 ? html`<p class="empty">No breaks.</p>` : null}
    <p class="actions" aria-label="Pages of breaks">
      ${
        afters.length > 0
          ? html`<button type="button" disabled=${loading} onClick=${() => setAfters(afters.slice(0, -1))}>Previous breaks</button>`
          : null
      }
      ${next === null ? null : html`<button type="button" disabled=${loading} onClick=${() => setAfters([...afters, next])}>Next breaks</button>`}
    </p>
    <p><a href="#/reconciliation">All runs</a></p>`;
}
