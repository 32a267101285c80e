import { type AdminApi, adminApi } from './admin-api.js';
import { statusEvents } from './event-stream.js';
import { type EventIterationOptions, iterateEvents } from './event-feed.js';
import { PayorchError } from './payorch-error.js';
import { type ClientRequest, createRequester, errorBodyOf, queryString, sendChecked } from './requester.js';
import {
  checkRetryPolicy,
  createTransport,
  DEFAULT_RETRY,
  DEFAULT_SIGNATURE_SCHEME,
  REQUEST_TIMEOUT_MS,
  type RetryPolicy,
  sleepMs,
} from './transport.js';
import type { SignatureScheme } from './signing.js';
import type {
  AccountCreated,
  AccountCreateRequest,
  Balance,
  CancelRequest,
  CancelResult,
  ConfirmRequest,
  EventPage,
  EventQuery,
  FeedEvent,
  ConfirmResult,
  Health,
  HistoryQuery,
  Intent,
  IntentCreated,
  IntentCreateRequest,
  IntentEvents,
  IntentStatusMessage,
  IppsRegistration,
  IppsRegistrationRequest,
  PolicyDecision,
  PolicyEvaluationRequest,
  Quote,
  QuoteRequest,
  Statement,
  StatementFileFormat,
  StatementQuery,
  Transactions,
} from './types.js';

/** A service key's id and secret (every route), or the operator's ADMIN_TOKEN (the /admin routes only). */
export type PayorchCredentials =
  | {
      readonly serviceId: string;
      readonly secret: string;
      /** 'message' (default): HTTP Message Signatures, which bind X-User-Id; 'x-signature': the older scheme (docs/rules.md R1). */
      readonly signatureScheme?: SignatureScheme;
      readonly adminToken?: undefined;
    }
  | { readonly adminToken: string; readonly serviceId?: undefined; readonly secret?: undefined; readonly signatureScheme?: undefined };

export type PayorchClientOptions = PayorchCredentials & {
  /** e.g. http://127.0.0.1:3000; request paths are appended to it and signed as sent. */
  readonly baseUrl: string;
  /** Defaults to the global fetch; tests pass a stub. */
  readonly fetch?: typeof fetch;
  /** Defaults to DEFAULT_RETRY (3 attempts, 200 ms base). `{attemptsMax: 1}` turns retries off. */
  readonly retry?: RetryPolicy;
  /** Per attempt. */
  readonly timeoutMs?: number;
  /** Waits between attempts; tests may pass one that records the delays. */
  readonly sleep?: (ms: number) => Promise<void>;
};

/** X-User-Id: the platform user the request acts for (0 is the admin bypass). */
export interface UserOptions {
  readonly userId: number;
}

export interface RawAnswer {
  readonly status: number;
  readonly body: unknown;
}

export interface PayorchClient {
  /** Never retried and never throws for 503: a probe reports what it sees. */
  health(): Promise<Health>;
  /** Any signed request, for endpoints without a method; throws PayorchError for a 4xx or 5xx. */
  request(request: ClientRequest): Promise<RawAnswer>;
  accounts: {
    /** X-User-Id defaults to body.userId, the only other value the service accepts being 0. */
    create(body: AccountCreateRequest, options?: Partial<UserOptions>): Promise<AccountCreated>;
    /** `name`: an account name or its ledger UUID. */
    balance(name: string): Promise<Balance>;
    transactions(name: string, query?: HistoryQuery): Promise<Transactions>;
    /** The balance at an instant (docs/rules.md R58): final once `at` is more than 5 s past. */
    balanceAt(name: string, at: string | Date): Promise<Balance>;
    /** json, at most 10,000 entries; with format csv or camt053 the file as a byte stream of any length. */
    statement(name: string, query: StatementQuery): Promise<Statement>;
    statement(
      name: string,
      query: StatementQuery & { readonly format: StatementFileFormat; readonly signal?: AbortSignal },
    ): Promise<ReadableStream<Uint8Array>>;
  };
  registerIpps(body: IppsRegistrationRequest, options: UserOptions): Promise<IppsRegistration>;
  intents: {
    /** Without an idempotencyKey the client makes one, so that its own retries replay rather than pay twice. */
    create(body: IntentCreateRequest, options: UserOptions): Promise<IntentCreated>;
    get(intentId: string): Promise<Intent>;
    events(intentId: string): Promise<IntentEvents>;
    /**
     * Live status over Server-Sent Events: the current status first, then one message per
     * transition; ends after a final status, at the server's stream lifetime, or when `signal`
     * aborts. Not retried: a caller that needs certainty reads the intent after it ends.
     */
    stream(intentId: string, options?: { readonly signal?: AbortSignal }): AsyncGenerator<IntentStatusMessage>;
    quote(body: QuoteRequest): Promise<Quote>;
    /** X-User-Id defaults to payerUserId. `ifMatch`: the intent version the caller saw (409 VERSION_MISMATCH otherwise). */
    confirm(intentId: string, body: ConfirmRequest, options?: Partial<UserOptions> & { readonly ifMatch?: number }): Promise<ConfirmResult>;
    cancel(intentId: string, body: CancelRequest, options: UserOptions): Promise<CancelResult>;
  };
  policies: {
    evaluate(body: PolicyEvaluationRequest): Promise<PolicyDecision>;
  };
  /** The event feed: every status change of this service's intents, once each, in order (GET /events). */
  events: {
    /** One page after `after`. */
    list(query?: EventQuery): Promise<EventPage>;
    /** Every event after `after`, following nextCursor; with `follow: true` it waits for new ones until `signal` aborts. */
    iterate(options?: EventIterationOptions): AsyncGenerator<FeedEvent>;
  };
  admin: AdminApi;
}

const segment = encodeURIComponent;

export function createPayorchClient(options: PayorchClientOptions): PayorchClient {
  const transport = createTransport({
    baseUrl: options.baseUrl,
    credentials:
      options.adminToken === undefined
        ? {
            kind: 'signed',
            serviceId: options.serviceId,
            secret: options.secret,
            scheme: options.signatureScheme ?? DEFAULT_SIGNATURE_SCHEME,
          }
        : { kind: 'bearer', token: options.adminToken },
    fetch: options.fetch ?? globalThis.fetch,
    retry: checkRetryPolicy(options.retry ?? DEFAULT_RETRY),
    timeoutMs: options.timeoutMs ?? REQUEST_TIMEOUT_MS,
    sleep: options.sleep ?? sleepMs,
  });
  const call = createRequester(transport);
  // A read: safe to retry, the same cursor answers the same page.
  const listEvents = (query: EventQuery): Promise<EventPage> =>
    call({ method: 'GET', path: `/events${queryString({ after: query.after, limit: query.limit })}`, retry: true });

  /** A statement file, streamed as the server writes it; an error answer throws as any call's does. */
  const openStatementFile = async (path: string, signal: AbortSignal): Promise<ReadableStream<Uint8Array>> => {
    const opened = await transport.open({ method: 'GET', path }, signal);
    if (opened.kind === 'answer') throw new PayorchError(opened.response.status, errorBodyOf(opened.response.body));
    return opened.response.body ?? new Blob([]).stream();
  };

  return {
    async health() {
      const answer = await transport.send({ method: 'GET', path: '/health', retry: false });
      return answer.body as Health;
    },
    async request(request) {
      const answer = await sendChecked(transport, request);
      return { status: answer.status, body: answer.body };
    },
    accounts: {
      // Idempotent (200 when every account existed, docs/rules.md R15): safe to retry.
      create: (body, user = {}) =>
        call({ method: 'POST', path: '/accounts', json: { currency: 'THB', ...body }, userId: user.userId ?? body.userId, retry: true }),
      balance: (name) => call({ method: 'GET', path: `/accounts/${segment(name)}/balance`, retry: true }),
      transactions: (name, query = {}) =>
        call({ method: 'GET', path: `/accounts/${segment(name)}/transactions${queryString({ ...query })}`, retry: true }),
      balanceAt: (name, at) =>
        call({
          method: 'GET',
          path: `/accounts/${segment(name)}/balance${queryString({ at: typeof at === 'string' ? at : at.toISOString() })}`,
          retry: true,
        }),
      statement: ((name: string, query: StatementQuery & { readonly format?: StatementFileFormat; readonly signal?: AbortSignal }) => {
        const path = `/accounts/${segment(name)}/statement${queryString({ from: query.from, to: query.to, format: query.format })}`;
        if (query.format === undefined) return call({ method: 'GET', path, retry: true });
        return openStatementFile(path, query.signal ?? new AbortController().signal);
      }) as PayorchClient['accounts']['statement'],
    },
    // Idempotent: a second registration answers 200 without calling the provider.
    registerIpps: (body, user) => call({ method: 'POST', path: '/accounts/register-ipps', json: body, userId: user.userId, retry: true }),
    intents: {
      create: (body, user) =>
        call({
          method: 'POST',
          path: '/intents',
          json: { ...body, idempotencyKey: body.idempotencyKey ?? crypto.randomUUID() },
          userId: user.userId,
          retry: true,
        }),
      get: (intentId) => call({ method: 'GET', path: `/intents/${segment(intentId)}`, retry: true }),
      events: (intentId) => call({ method: 'GET', path: `/intents/${segment(intentId)}/events`, retry: true }),
      async *stream(intentId, streamOptions = {}) {
        const path = `/intents/${segment(intentId)}/stream`;
        const opened = await transport.open(
          { method: 'GET', path, headers: { accept: 'text/event-stream' } },
          streamOptions.signal ?? new AbortController().signal,
        );
        if (opened.kind === 'answer') throw new PayorchError(opened.response.status, errorBodyOf(opened.response.body));
        if (opened.response.body === null) return;
        yield* statusEvents(opened.response.body);
      },
      quote: (body) => call({ method: 'POST', path: '/intents/quote', json: body, retry: true }),
      // The key makes a repeated confirm a replay (replayed: true), never a second payment.
      confirm: (intentId, body, confirmOptions = {}) =>
        call({
          method: 'POST',
          path: `/intents/${segment(intentId)}/confirm`,
          json: { ...body, idempotencyKey: body.idempotencyKey ?? crypto.randomUUID() },
          userId: confirmOptions.userId ?? body.payerUserId,
          ...(confirmOptions.ifMatch === undefined ? {} : { headers: { 'if-match': String(confirmOptions.ifMatch) } }),
          retry: true,
        }),
      // Not idempotent (docs/rules.md, Cancel): a repeat after a lost answer would report 409 CANNOT_CANCEL for a
      // cancel that succeeded, so a 5xx reaches the caller, who reads the intent before acting again.
      cancel: (intentId, body, user) =>
        call({ method: 'POST', path: `/intents/${segment(intentId)}/cancel`, json: body, userId: user.userId, retry: false }),
    },
    policies: {
      evaluate: (body) => call({ method: 'POST', path: '/policies/evaluate', json: body, retry: true }),
    },
    events: {
      list: (query = {}) => listEvents(query),
      iterate: (iterationOptions = {}) => iterateEvents(listEvents, iterationOptions),
    },
    admin: adminApi(call),
  };
}
