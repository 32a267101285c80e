// The admin API client. The token lives in sessionStorage only: it goes away with the tab, and is
// sent as a bearer header, never in a URL (where logs and history would keep it) or a cookie.
const TOKEN_KEY = 'payorch.adminToken';

export const readToken = () => sessionStorage.getItem(TOKEN_KEY);
export const saveToken = (token) => sessionStorage.setItem(TOKEN_KEY, token);
export const forgetToken = () => sessionStorage.removeItem(TOKEN_KEY);

/** An answer other than 2xx, with the service's error code and message (docs/rules.md, Error bodies). */
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let onUnauthorized = () => {};
/** Called on any 401, so that a token revoked mid-session sends the operator back to the sign-in form. */
export const whenUnauthorized = (callback) => {
  onUnauthorized = callback;
};

export async function api(path, { method = 'GET', body, token = readToken() } = {}) {
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

/** `?a=1&b=2` of the parameters that have a value ('' and undefined are left out). */
export function queryString(params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined && value !== null && value !== '') query.set(name, String(value));
  }
  const text = query.toString();
  return text === '' ? '' : `?${text}`;
}
