// Display helpers. Amounts arrive as satang in decimal strings; BigInt keeps them exact.
import { html } from './html.js';
import { FINAL_STATUSES } from './model.js';

export const isFinal = (status) => FINAL_STATUSES.includes(status);

export function money(satang, currency = 'THB') {
  if (satang === null || satang === undefined) return '';
  const value = BigInt(satang);
  const sign = value < 0n ? '-' : '';
  const abs = value < 0n ? -value : value;
  const baht = (abs / 100n).toLocaleString('en-US');
  return `${sign}${baht}.${String(abs % 100n).padStart(2, '0')} ${currency}`;
}

/** UTC, to the second: operators compare these with log lines, which are UTC too. */
export const time = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z` : '');

export const shortId = (id) => id.slice(0, 8);

export const intentLink = (id) => html`<a href=${`#/intents/${id}`} title=${id}><code>${shortId(id)}</code></a>`;
export const accountLink = (name) => (name ? html`<a href=${`#/accounts/${encodeURIComponent(name)}`}>${name}</a>` : '—');

export const statusBadge = (status) => html`<span class=${`badge status-${status}`}>${status}</span>`;

export const ErrorNote = ({ error }) => (error ? html`<p class="error" role="alert">${error.code ? `${error.code}: ` : ''}${error.message}</p>` : null);
