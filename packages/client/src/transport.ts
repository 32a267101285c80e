import { PayorchConnectionError } from './payorch-error.js';
import { createSigner, type SignatureScheme } from './signing.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** docs/SECURITY.md section 2 says why message signatures are the default. */
export const DEFAULT_SIGNATURE_SCHEME: SignatureScheme = 'message';

export interface RetryPolicy {
  /** Attempts in all, the first one included: 1 means no retry. */
  readonly attemptsMax: number;
  /** Wait before the first retry; doubled for each further one, then jittered. */
  readonly baseDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { attemptsMax: 3, baseDelayMs: 200 };
/** However many attempts are allowed, no single wait grows past this. */
export const RETRY_DELAY_MAX_MS = 10_000;
/** A request with no answer by then is treated as a network error (and retried when it may be). */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Far more than any sane policy; it keeps a typo from turning into an endless loop. */
const ATTEMPTS_LIMIT = 20;

/**
 * Who the requests come from: a service that signs each request with its secret, or an operator
 * holding the admin bearer token (ADMIN_TOKEN), which only the /admin routes accept.
 */
export type Credentials =
  | { readonly kind: 'signed'; readonly serviceId: string; readonly secret: string; readonly scheme: SignatureScheme }
  | { readonly kind: 'bearer'; readonly token: string };

export interface TransportOptions {
  readonly baseUrl: string;
  readonly credentials: Credentials;
  readonly fetch: typeof fetch;
  readonly retry: RetryPolicy;
  readonly timeoutMs: number;
  readonly sleep: (ms: number) => Promise<void>;
}

export interface SendRequest {
  readonly method: HttpMethod;
  /** Path with its query, exactly as signed and sent. */
  readonly path: string;
  /** Serialized once by the caller, so that every attempt sends (and signs) the same bytes. */
  readonly body?: string;
  readonly userId?: number;
  readonly headers?: Readonly<Record<string, string>>;
  /**
   * True only where a repeat is harmless (docs/rules.md, Retries): reads, and writes that carry an
   * idempotency key or are idempotent by definition. A retry of anything else could act twice.
   */
  readonly retry: boolean;
}

export interface RawResponse {
  readonly status: number;
  /** Parsed JSON, or the text when the answer is not JSON (empty string for no body). */
  readonly body: unknown;
}

export interface Transport {
  send(request: SendRequest): Promise<RawResponse>;
  /**
   * One attempt, no time-out but the caller's signal (a stream stays open as long as the caller
   * wants it): the open response for a 1xx–3xx, the parsed answer otherwise.
   */
  open(
    request: Omit<SendRequest, 'retry'>,
    signal: AbortSignal,
  ): Promise<{ readonly kind: 'open'; readonly response: Response } | { readonly kind: 'answer'; readonly response: RawResponse }>;
}

export function checkRetryPolicy(policy: RetryPolicy): RetryPolicy {
  if (!Number.isInteger(policy.attemptsMax) || policy.attemptsMax < 1 || policy.attemptsMax > ATTEMPTS_LIMIT) {
    throw new RangeError(`retry.attemptsMax must be an integer from 1 to ${ATTEMPTS_LIMIT} (got ${policy.attemptsMax})`);
  }
  if (!Number.isFinite(policy.baseDelayMs) || policy.baseDelayMs < 0) {
    throw new RangeError(`retry.baseDelayMs must be >= 0 (got ${policy.baseDelayMs})`);
  }
  return policy;
}

/**
 * Exponential backoff with equal jitter: half of the doubled delay is fixed, so the waits really
 * grow; the other half is random, so clients that failed together do not retry together.
 */
export function backoffMs(policy: RetryPolicy, retryNumber: number, random: () => number = Math.random): number {
  const ceilingMs = Math.min(RETRY_DELAY_MAX_MS, policy.baseDelayMs * 2 ** (retryNumber - 1));
  return Math.round(ceilingMs / 2 + random() * (ceilingMs / 2));
}

export const sleepMs = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function parseBody(response: Response): Promise<unknown> {
  const text = await response.text();
  if (text === '') return '';
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** fetch says only 'fetch failed'; the useful part (ECONNREFUSED, ENOTFOUND) is in its cause. */
function describeNetworkError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause instanceof Error ? error.cause.message : undefined;
  return cause === undefined || cause === '' ? error.message : `${error.message} (${cause})`;
}

type Attempt = { readonly kind: 'answer'; readonly response: RawResponse } | { readonly kind: 'no-answer'; readonly error: unknown };

/**
 * Signed per attempt: a retry after a long backoff must not fall outside the ±60 s window, and must
 * not repeat the nonce of the attempt before it.
 */
function authenticator(credentials: Credentials): (request: SendRequest, body: string) => Promise<Record<string, string>> {
  switch (credentials.kind) {
    case 'signed': {
      const signer = createSigner(credentials.serviceId, credentials.secret, credentials.scheme);
      return (request, body) =>
        signer.sign(request.method, request.path, body, request.userId === undefined ? {} : { userId: request.userId });
    }
    case 'bearer':
      return async (request) => ({
        authorization: `Bearer ${credentials.token}`,
        ...(request.userId === undefined ? {} : { 'x-user-id': String(request.userId) }),
      });
  }
}

/** Signs and sends requests; retries 5xx answers and network errors of retryable requests, nothing else (docs/rules.md, Retries). */
export function createTransport(options: TransportOptions): Transport {
  const base = options.baseUrl.replace(/\/+$/, '');
  const authHeaders = authenticator(options.credentials);

  async function signedInit(request: SendRequest, signal: AbortSignal): Promise<RequestInit> {
    const body = request.body ?? '';
    const headers: Record<string, string> = {
      ...(await authHeaders(request, body)),
      ...(body === '' ? {} : { 'content-type': 'application/json' }),
      ...request.headers,
    };
    return { method: request.method, headers, ...(body === '' ? {} : { body }), signal };
  }

  async function attemptOnce(request: SendRequest): Promise<Attempt> {
    try {
      const response = await options.fetch(`${base}${request.path}`, await signedInit(request, AbortSignal.timeout(options.timeoutMs)));
      return { kind: 'answer', response: { status: response.status, body: await parseBody(response) } };
    } catch (error) {
      return { kind: 'no-answer', error };
    }
  }

  return {
    async send(request) {
      const attemptsMax = request.retry ? options.retry.attemptsMax : 1;
      let last = await attemptOnce(request);
      for (let retryNumber = 1; retryNumber < attemptsMax; retryNumber++) {
        // 4xx (409 included) say the request itself must change: repeating it cannot help.
        if (last.kind === 'answer' && last.response.status < 500) return last.response;
        await options.sleep(backoffMs(options.retry, retryNumber));
        last = await attemptOnce(request);
      }
      if (last.kind === 'answer') return last.response;
      const reason = describeNetworkError(last.error);
      throw new PayorchConnectionError(
        `${request.method} ${base}${request.path}: no answer after ${attemptsMax} attempt(s): ${reason}`,
        attemptsMax,
        last.error,
      );
    },
    async open(request, signal) {
      let response: Response;
      try {
        response = await options.fetch(`${base}${request.path}`, await signedInit({ ...request, retry: false }, signal));
      } catch (error) {
        throw new PayorchConnectionError(`${request.method} ${base}${request.path}: ${describeNetworkError(error)}`, 1, error);
      }
      if (response.status < 400) return { kind: 'open', response };
      return { kind: 'answer', response: { status: response.status, body: await parseBody(response) } };
    },
  };
}
