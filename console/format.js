// Display helpers. Amounts arrive as satang in decimal strings; BigInt keeps them exact.
import { ApiError } from './api.js';
import { html } from './html.js';
import { FINAL_STATUSES } from './model.js';

/** @param {string} status */
export const isFinal = (status) => /** @type {readonly string[]} */ (FINAL_STATUSES).includes(status);

/**
 * @param {string | null | undefined} satang
 * @param {string} [currency]
 */
export function money(satang, currency = 'THB') {
  if (satang === null || satang === undefined) return '';
  const value = BigInt(satang);
  const sign = value < 0n ? '-' : '';
  const abs = value < 0n ? -value : value;
  const baht = (abs / 100n).toLocaleString('en-US');
  return `${sign}${baht}.${String(abs % 100n).padStart(2, '0')} ${currency}`;
}

/** UTC, to the second: operators compare these with log lines, which are UTC too. */
/** @param {string | null | undefined} iso */
export const time = (iso) => (iso ? `${iso.slice(0, 10)} ${iso.slice(11, 19)}Z` : '');

/**
 * The whole id, never a prefix: operators paste ids into logs, the CLI and support tickets, and a
 * prefix matches nothing there. Selecting the code element selects the whole id for copying.
 * @param {string} id
 */
export const intentLink = (id) => html`<a href=${`#/intents/${id}`}><code class="id">${id}</code></a>`;
/** @param {string | null} name */
export const accountLink = (name) => (name ? html`<a href=${`#/accounts/${encodeURIComponent(name)}`}>${name}</a>` : '—');

/** @param {string} status */
export const statusBadge = (status) => html`<span class=${`badge status-${status}`}>${status}</span>`;

/**
 * What went wrong, with the service's error code when the admin API answered one.
 * @param {{ error: unknown }} props
 */
export const ErrorNote = ({ error }) =>
  error instanceof Error
    ? html`<p class="error" role="alert">${error instanceof ApiError ? `${error.code}: ` : ''}${error.message}</p>`
    : null;

/**
 * An input's handler that passes on the field's value.
 * @param {(value: string) => void} set
 * @returns {(event: import('preact').TargetedEvent<HTMLInputElement | HTMLSelectElement>) => void}
 */
export const withValue = (set) => (event) => set(event.currentTarget.value);
