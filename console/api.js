// The admin API client. The token lives in sessionStorage only: it goes away with the tab, and is
// sent as a bearer header, never in a URL (where logs and history would keep it) or a cookie.
import { useEffect, useState } from 'preact/hooks';

const TOKEN_KEY = 'payorch.adminToken';

/*
 * The admin API's answers, as far as the console reads them: the TypeScript client's types
 * (packages/client/src/types.ts), generated from the OpenAPI document the server's schemas make.
 */
/** @typedef {import('@payorch/client').AdminIntent} AdminIntent */
/** @typedef {import('@payorch/client').IntentEvent} AdminIntentEvent */
/** @typedef {AdminIntent & { events: AdminIntentEvent[] }} AdminIntentWithEvents */
/** @typedef {import('@payorch/client').AdminIntentPage} IntentPage */
/** @typedef {import('@payorch/client').ResolveResult} ResolveAnswer */
/** @typedef {import('typebox').Static<typeof import('../dist/http/schemas/shared.js').HistoryEntry>} HistoryEntry */
/** @typedef {{ accountName: string, accountType: string, userId: number | null, currency: string, balance: string, transactions: HistoryEntry[] }} AdminAccount */
/** @typedef {import('@payorch/client').Statement} AccountStatement */
/** @typedef {import('@payorch/client').AuditViolation} AuditViolation */
/** @typedef {import('@payorch/client').AuditResult} AuditAnswer */
/** @typedef {import('@payorch/client').DeadWebhook} DeadWebhook */
/** @typedef {import('@payorch/client').AdminRefunds} AdminRefunds */
/** @typedef {import('@payorch/client').ConsoleStatus} ConsoleStatus */
/** @typedef {import('@payorch/client').ReconciliationRun} ReconciliationRun */
/** @typedef {import('@payorch/client').ReconciliationRunSummary} ReconciliationRunSummary */

export const readToken = () => sessionStorage.getItem(TOKEN_KEY);
/** @param {string} token */
export const saveToken = (token) => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

/** An answer other than 2xx, with the service's error code and message (docs/rules.md, Error bodies). */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** @type {() => void} */
let onUnauthorized = () => {};
/**
 * Called on any 401, so that a token revoked mid-session sends the operator back to the sign-in form.
 * @param {() => void} callback
 */
export const whenUnauthorized = (callback) => {
  onUnauthorized = callback;
};

/**
 * The answer of the admin API route at `path`, typed by the caller as that route's answer above.
 * @template T
 * @param {string} path
 * @param {{ method?: string, body?: object, token?: string | null }} [options]
 * @returns {Promise<T>}
 */
export async function api(path, { method = 'GET', body, token = readToken() } = {}) {
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${token ?? ''}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    cache: 'no-store',
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const data = await response.json().catch(() => null);
  if (response.ok) return data;
  if (response.status === 401) onUnauthorized();
  throw new ApiError(response.status, data?.error ?? 'HTTP_ERROR', data?.message ?? response.statusText);
}

/**
 * A file the admin API answers (a statement as csv or camt.053), as a Blob for a download.
 * @param {string} path
 * @returns {Promise<Blob>}
 */
export async function apiFile(path) {
  const response = await fetch(path, { headers: { authorization: `Bearer ${readToken() ?? ''}` }, cache: 'no-store' });
  if (response.ok) return response.blob();
  const data = await response.json().catch(() => null);
  if (response.status === 401) onUnauthorized();
  throw new ApiError(response.status, data?.error ?? 'HTTP_ERROR', data?.message ?? response.statusText);
}

/**
 * `?a=1&b=2` of the parameters that have a value ('' and undefined are left out).
 * @param {Record<string, string | number | null | undefined>} params
 */
export function queryString(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  }
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}

/**
 * The answer of the admin API route at `path`, read again when `path` or `readAgainOn` changes;
 * an answer that arrives after a newer read started is dropped. Until the new answer arrives the
 * last one stays, and `answeredPath` (the path it was read from) tells a page which one it shows.
 * @template T
 * @param {string} path
 * @param {unknown} [readAgainOn]
 * @returns {{ answer: T | null, error: unknown, answeredPath: string | null }}
 */
export function useRead(path, readAgainOn) {
  const [answer, setAnswer] = useState(/** @type {T | null} */ (null));
  const [answeredPath, setAnsweredPath] = useState(/** @type {string | null} */ (null));
  const [error, setError] = useState(/** @type {unknown} */ (null));
  useEffect(() => {
    let current = true;
    api(path).then(
      (/** @type {T} */ read) => {
        if (!current) return;
        setAnswer(read);
        setAnsweredPath(path);
        setError(null);
      },
      (/** @type {unknown} */ caught) => {
        if (current) setError(caught);
      },
    );
    return () => {
      current = false;
    };
  }, [path, readAgainOn]);
  return { answer, error, answeredPath };
}
