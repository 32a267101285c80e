import { PayorchError, type PayorchErrorBody } from './payorch-error.js';
import type { HttpMethod, RawResponse, Transport } from './transport.js';

export interface ClientRequest {
  readonly method: HttpMethod;
  /** Path with its query; path segments already encoded. */
  readonly path: string;
  /** A JSON value: serialized here, once, before the first attempt. */
  readonly json?: unknown;
  /** Sent as is instead of `json` (the CLI's `call` passes the user's text through). */
  readonly rawBody?: string;
  /** X-User-Id, where the endpoint acts for a user. */
  readonly userId?: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** See SendRequest.retry: only requests that are safe to repeat (docs/rules.md, Retries). */
  readonly retry: boolean;
}

/** Sends a request and resolves with the body of a 1xx–3xx answer; a 4xx or 5xx becomes a PayorchError. */
export type Requester = <T>(request: ClientRequest) => Promise<T>;

export const errorBodyOf = (body: unknown): PayorchErrorBody | string =>
  typeof body === 'object' && body !== null && !Array.isArray(body)
    ? (body as PayorchErrorBody)
    : typeof body === 'string'
      ? body
      : JSON.stringify(body);

/** The answer with its status, or PayorchError for a 4xx or 5xx. */
export async function sendChecked(transport: Transport, request: ClientRequest): Promise<RawResponse> {
  const body = request.rawBody ?? (request.json === undefined ? undefined : JSON.stringify(request.json));
  const response = await transport.send({
    method: request.method,
    path: request.path,
    retry: request.retry,
    ...(body === undefined ? {} : { body }),
    ...(request.userId === undefined ? {} : { userId: request.userId }),
    ...(request.headers === undefined ? {} : { headers: request.headers }),
  });
  if (response.status >= 400) throw new PayorchError(response.status, errorBodyOf(response.body));
  return response;
}

export function createRequester(transport: Transport): Requester {
  // The generic names the wire type of the endpoint; the body is the service's JSON as parsed.
  return async <T>(request: ClientRequest) => (await sendChecked(transport, request)).body as T;
}

/** `?a=1&b=x` from the given fields, skipping absent ones; '' when none is given. */
export function queryString(fields: Readonly<Record<string, string | number | boolean | undefined>>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(fields)) if (value !== undefined) params.set(name, String(value));
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
