// The operator console: a token gate, then five sections picked by the URL hash (#/intents,
// #/review, #/accounts, #/audit, #/webhooks, #/reconciliation). The hash carries only ids and account names, never the token.
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { api, forgetToken, readToken, saveToken, whenUnauthorized } from './api.js';
import { AccountLookup } from './accounts.js';
import { AuditStatus } from './audit.js';
import { ErrorNote, withValue } from './format.js';
import { html } from './html.js';
import { IntentDetail, IntentList } from './intents.js';
import { Reconciliation } from './reconciliation.js';
import { ReviewQueue } from './review.js';
import { DeadWebhooks } from './webhooks.js';

const SECTIONS = [
  { path: 'intents', label: 'Intents' },
  { path: 'review', label: 'Manual review' },
  { path: 'accounts', label: 'Accounts' },
  { path: 'audit', label: 'Invariant audit' },
  { path: 'webhooks', label: 'Dead webhooks' },
  { path: 'reconciliation', label: 'Reconciliation' },
];

/** @typedef {{ section: string, arg: string | null }} Route */

/**
 * `#/intents/ID` → { section: 'intents', arg: 'ID' }; anything unknown shows the intents list.
 * @param {string} hash
 * @returns {Route}
 */
function parseHash(hash) {
  const [section = '', ...rest] = hash.replace(/^#\/?/, '').split('/');
  const known = SECTIONS.some((s) => s.path === section);
  return { section: known ? section : 'intents', arg: rest.length > 0 ? decodeURIComponent(rest.join('/')) : null };
}

function useRoute() {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseHash(location.hash));
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

/** @param {{ onAccepted: () => void }} props */
function TokenForm({ onAccepted }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState(/** @type {unknown} */ (null));
  const [busy, setBusy] = useState(false);
  const [status, setStatus] = useState(/** @type {import('./api.js').ConsoleStatus | null} */ (null));
  // Asked before the operator types anything: a server without ADMIN_TOKEN can accept no token at all.
  useEffect(() => {
    fetch('/console/status', { cache: 'no-store' })
      .then((response) => (response.ok ? response.json() : null))
      .then(setStatus, () => setStatus(null));
  }, []);
  /** @param {SubmitEvent} event */
  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      // A cheap admin read proves the token before it is kept.
      await api('/admin/intents?limit=1', { token });
      saveToken(token);
      onAccepted();
    } catch (caught) {
      setError(caught);
    } finally {
      setBusy(false);
    }
  };
  return html`
    <main class="sign-in">
      <h1>payorch console</h1>
      ${
        status?.adminTokenConfigured === false
          ? html`<p class="error" role="alert" id="no-admin-token">
              This server has no ADMIN_TOKEN, so no token can open the console: restart it with ADMIN_TOKEN set in its environment.
            </p>`
          : null
      }
      <form onSubmit=${submit}>
        <label for="admin-token">Admin token</label>
        <input id="admin-token" type="password" autocomplete="off" required value=${token} onInput=${withValue(setToken)} />
        <button type="submit" disabled=${busy}>Open console</button>
        <p class="hint">Kept in this tab's session storage only and sent as a bearer token.</p>
        <${ErrorNote} error=${error} />
      </form>
    </main>`;
}

/** @param {{ route: Route }} props */
function Section({ route }) {
  switch (route.section) {
    case 'intents':
      return route.arg === null ? html`<${IntentList} />` : html`<${IntentDetail} id=${route.arg} />`;
    case 'review':
      return html`<${ReviewQueue} />`;
    case 'accounts':
      return html`<${AccountLookup} name=${route.arg} />`;
    case 'audit':
      return html`<${AuditStatus} />`;
    case 'webhooks':
      return html`<${DeadWebhooks} />`;
    case 'reconciliation':
      return html`<${Reconciliation} runId=${route.arg} />`;
    default:
      throw new Error(`unknown section ${route.section}`);
  }
}

function App() {
  const [signedIn, setSignedIn] = useState(() => readToken() !== null);
  const route = useRoute();
  useEffect(
    () =>
      whenUnauthorized(() => {
        forgetToken();
        setSignedIn(false);
      }),
    [],
  );
  if (!signedIn) return html`<${TokenForm} onAccepted=${() => setSignedIn(true)} />`;
  const signOut = () => {
    forgetToken();
    setSignedIn(false);
  };
  return html`
    <header>
      <h1>payorch console</h1>
      <nav aria-label="Sections">
        <ul>
          ${SECTIONS.map(
            (s) => html`
            <li><a href=${`#/${s.path}`} aria-current=${route.section === s.path ? 'page' : undefined}>${s.label}</a></li>`,
          )}
        </ul>
      </nav>
      <button type="button" class="secondary" onClick=${signOut}>Forget token</button>
    </header>
    <main><${Section} route=${route} /></main>`;
}

const root = document.getElementById('root');
if (root === null) throw new Error('console/index.html: no #root element');
render(html`<${App} />`, root);
