/**
 * The PSPX provider behind one interface whose business outcomes are values, never exceptions
 * (Medusa-style provider adapter). docs/PSPX.md is the long form of the wire contract below.
 *
 * Wire contract (JSON over HTTP, amounts are decimal strings of satang):
 *
 *   POST /v1/wallets                      Idempotency-Key: <key>   body: customer data
 *        200 {walletId}                   the same key always names the same wallet
 *        422 {reason}                     the provider refuses the customer data
 *   POST /v1/payouts/{intentId}/inquiry   body: {amount, currency, receiverType, receiverAccount, receiverBank?}
 *        200 {result: 'OK', inquiryRef} | {result: 'REJECTED', reason}
 *        409 {reason}                     the intent id was already inquired with other parameters
 *   POST /v1/payouts/{intentId}/confirm   body: {inquiryRef}
 *        200 {result: 'COMPLETED', settlementDate: 'YYYYMMDD'} | {result: 'PENDING'} | {result: 'REJECTED', reason}
 *   GET  /v1/payouts/{intentId}
 *        200 {status: 'COMPLETED', settlementDate} | {status: 'PENDING'} | {status: 'FAILED', reason}
 *        404                              the provider never received a confirm for the intent
 *   GET  /v1/partner/balance              200 {balance: '<satang>'}
 *   GET  /v1/statements/{YYYYMMDD}        200 {date, openingBalance, closingBalance, lines: [{lineId, intentId, type, amount, valueDate}]}
 *        404                              the provider has not closed that day yet
 *
 * Every payout call is idempotent on the intent id: the provider answers a repeated call with the
 * outcome of the first and pays at most once. 5xx, time-outs and network errors are `unknown`.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import Type, { type Static } from 'typebox';
import { type StatementHeader, type StatementSink, streamStatement } from './statement-reader.js';

/** Who a payout goes to, in the provider's words (docs/PSPX.md). */
export const RECEIVER_TYPES = ['MSISDN', 'NATID', 'EWALLETID', 'BANKAC', 'BILLERID'] as const;
export type ReceiverType = (typeof RECEIVER_TYPES)[number];
/** The receiver types that name an account at a bank, so the payout needs `receiverBank`. */
export const RECEIVER_TYPES_WITH_BANK: readonly ReceiverType[] = ['BANKAC', 'BILLERID'];
export const isReceiverType = (value: unknown): value is ReceiverType => RECEIVER_TYPES.some((type) => type === value);

export interface Receiver {
  readonly receiverType: ReceiverType;
  readonly receiverAccount: string;
  readonly receiverBank?: string;
}

const TEXT_LENGTH_MAX = 200;
const ADDRESS_LENGTH_MAX = 500;

const Text = (maxLength = TEXT_LENGTH_MAX) => Type.String({ minLength: 1, maxLength, pattern: '\\S' });
/** ajv-formats `date` is RFC 3339 full-date: 2023-02-29 and 2024-13-01 fail, 2024-02-29 passes. */
const CalendarDate = Type.String({ format: 'date', pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}$', description: 'YYYY-MM-DD' });
const Phone = Type.String({ pattern: '^\\+?[0-9][0-9 -]{5,18}[0-9]$', description: 'digits, optional leading +, spaces or dashes' });

/** What PSPX needs to open a wallet: the body of POST /accounts/register-ipps, passed on as it is. */
export const WalletCustomer = Type.Object(
  {
    externalUserId: Text(),
    customerEnglishName: Text(),
    senderTaxId: Type.String({ pattern: '^[0-9]{13}$', description: '13 digits' }),
    senderAccountName: Text(),
    senderMobileNumber: Type.Optional(Phone),
    documentExpiry: CalendarDate,
    dateOfBirth: CalendarDate,
    phoneNumber: Phone,
    nationality: Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2' }),
    address: Text(ADDRESS_LENGTH_MAX),
  },
  { additionalProperties: false },
);
export type WalletCustomer = Static<typeof WalletCustomer>;

/**
 * Why an answer is unknown. `circuit_open` alone guarantees the request was never sent; after the
 * others the provider may or may not have acted, so a confirm must be settled by statusInquiry.
 */
export type UnknownCause = 'timeout' | 'network' | 'http_5xx' | 'bad_response' | 'circuit_open';
export type Unknown = {
  readonly kind: 'unknown';
  readonly cause: UnknownCause;
  readonly detail: string;
  /** The provider's status with `http_5xx`: a confirm answered 503 is one the provider turned away (docs/rules.md R65). */
  readonly httpStatus?: number;
};
export type Rejected = { readonly kind: 'rejected'; readonly reason: string };

export type RegisterWalletResult = { readonly kind: 'registered'; readonly walletId: string } | Rejected | Unknown;
export type InquiryResult = { readonly kind: 'ok'; readonly inquiryRef: string } | Rejected | Unknown;
export type ConfirmResult =
  | { readonly kind: 'completed'; readonly settlementDate: string }
  | { readonly kind: 'pending' }
  | Rejected
  | Unknown;
export type StatusResult =
  | { readonly kind: 'completed'; readonly settlementDate: string }
  | { readonly kind: 'pending' }
  | { readonly kind: 'failed'; readonly reason: string }
  /** No confirm ever reached the provider: nothing was paid. */
  | { readonly kind: 'not_found' }
  | Unknown;
export type BalanceResult = { readonly kind: 'ok'; readonly balance: bigint } | Unknown;
/**
 * `closed`: every line went to the sink and the header is whole. `not_closed`: 404, the day is not
 * over at the provider. `invalid`: the provider answered a statement outside the contract (a bad
 * amount, a field missing): not retried, since the same request gets the same statement.
 */
export type StatementResult =
  | { readonly kind: 'closed'; readonly header: StatementHeader }
  | { readonly kind: 'not_closed' }
  | { readonly kind: 'invalid'; readonly reason: string }
  | Unknown;

export interface PspxClient {
  /** Idempotent on `idempotencyKey`: a repeated call names the wallet of the first. */
  registerWallet(idempotencyKey: string, customer: WalletCustomer): Promise<RegisterWalletResult>;
  inquiry(intentId: string, amount: bigint, receiver: Receiver): Promise<InquiryResult>;
  /** Sent once: an unknown answer is resolved with statusInquiry, never by sending it again (docs/rules.md, One confirm). */
  confirm(intentId: string, inquiryRef: string): Promise<ConfirmResult>;
  statusInquiry(intentId: string): Promise<StatusResult>;
  partnerBalance(): Promise<BalanceResult>;
  /**
   * The day's statement, streamed into `sink` in batches (never held whole). Retried like the other
   * reads; each attempt starts with `sink.begin()`, so a sink drops what a failed attempt gave it.
   */
  statement(date: string, sink: StatementSink): Promise<StatementResult>;
}

export interface PspxClientOptions {
  readonly baseUrl: string;
  /** Per attempt, not per call. */
  readonly timeoutMs?: number;
  /** Attempts of the calls that are safe to repeat (all but confirm). */
  readonly attemptsMax?: number;
  /** Confirm attempts; 1 keeps the "never a second confirm" rule even though the provider is idempotent. */
  readonly confirmAttemptsMax?: number;
  readonly backoffBaseMs?: number;
  readonly backoffCapMs?: number;
  /** Consecutive failed attempts that open the breaker. */
  readonly breakerFailuresMax?: number;
  readonly breakerCooldownMs?: number;
  readonly now?: () => number;
  readonly random?: () => number;
  /** Told of every attempt sent (not those the open breaker held back), for the latency metric. */
  readonly observeAttempt?: (operation: PspxOperation, outcome: AttemptOutcome, seconds: number) => void;
}

/** The client's calls, as the metric labels name them. */
export type PspxOperation = 'register_wallet' | 'inquiry' | 'confirm' | 'status' | 'balance' | 'statement';
/** `answer`: the provider answered within the contract (any status below 500); otherwise why not. */
export type AttemptOutcome = 'answer' | Exclude<UnknownCause, 'circuit_open'>;

export const PSPX_DEFAULTS = {
  timeoutMs: 3000,
  attemptsMax: 3,
  confirmAttemptsMax: 1,
  backoffBaseMs: 100,
  backoffCapMs: 2000,
  breakerFailuresMax: 5,
  breakerCooldownMs: 10_000,
} as const;

/**
 * closed → (failuresMax consecutive failures) → open → (cooldownMs) → half-open: one trial call;
 * its success closes, its failure opens again. Written here because opossum wraps throwing
 * functions and fires its own timers, while our outcomes are values and time-outs are per fetch.
 */
export class CircuitBreaker {
  private failures = 0;
  private openedAtMs: number | null = null;
  private trialInFlight = false;

  constructor(
    private readonly failuresMax: number,
    private readonly cooldownMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get state(): 'closed' | 'open' | 'half-open' {
    if (this.openedAtMs === null) return 'closed';
    return this.now() - this.openedAtMs >= this.cooldownMs ? 'half-open' : 'open';
  }

  /** True when a request may go out now; in half-open only one trial at a time. */
  tryAcquire(): boolean {
    const state = this.state;
    if (state === 'closed') return true;
    if (state === 'open' || this.trialInFlight) return false;
    this.trialInFlight = true;
    return true;
  }

  onSuccess(): void {
    this.failures = 0;
    this.openedAtMs = null;
    this.trialInFlight = false;
  }

  onFailure(): void {
    this.failures += 1;
    const wasTrial = this.trialInFlight;
    this.trialInFlight = false;
    if (wasTrial || this.failures >= this.failuresMax) this.openedAtMs = this.now();
  }
}

type Attempt = { readonly kind: 'answer'; readonly status: number; readonly body: Record<string, unknown> } | Unknown;

const unknown = (cause: UnknownCause, detail: string, httpStatus?: number): Unknown =>
  httpStatus === undefined ? { kind: 'unknown', cause, detail } : { kind: 'unknown', cause, detail, httpStatus };
const isUnknown = (outcome: { readonly kind: string }): outcome is Unknown => outcome.kind === 'unknown';

export class HttpPspxClient implements PspxClient {
  readonly breaker: CircuitBreaker;
  private readonly baseUrl: string;
  private readonly settings: Required<Omit<PspxClientOptions, 'baseUrl' | 'now' | 'observeAttempt'>>;
  private readonly observeAttempt: NonNullable<PspxClientOptions['observeAttempt']>;

  constructor(options: PspxClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.settings = { ...PSPX_DEFAULTS, random: Math.random, ...stripUndefined(options) };
    this.breaker = new CircuitBreaker(this.settings.breakerFailuresMax, this.settings.breakerCooldownMs, options.now ?? Date.now);
    this.observeAttempt = options.observeAttempt ?? (() => {});
  }

  async registerWallet(idempotencyKey: string, customer: WalletCustomer): Promise<RegisterWalletResult> {
    const answer = await this.call('register_wallet', 'POST', '/v1/wallets', customer, this.settings.attemptsMax, {
      'idempotency-key': idempotencyKey,
    });
    if (answer.kind === 'unknown') return answer;
    if (answer.status === 200 && typeof answer.body.walletId === 'string') return { kind: 'registered', walletId: answer.body.walletId };
    if (answer.status === 422) return { kind: 'rejected', reason: reasonOf(answer.body) };
    return unexpected(answer);
  }

  async inquiry(intentId: string, amount: bigint, receiver: Receiver): Promise<InquiryResult> {
    const body = { amount: amount.toString(), currency: 'THB', ...receiver };
    const answer = await this.call(
      'inquiry',
      'POST',
      `/v1/payouts/${encodeURIComponent(intentId)}/inquiry`,
      body,
      this.settings.attemptsMax,
    );
    if (answer.kind === 'unknown') return answer;
    if (answer.status === 409) return { kind: 'rejected', reason: reasonOf(answer.body) };
    if (answer.status !== 200) return unexpected(answer);
    if (answer.body.result === 'OK' && typeof answer.body.inquiryRef === 'string')
      return { kind: 'ok', inquiryRef: answer.body.inquiryRef };
    if (answer.body.result === 'REJECTED') return { kind: 'rejected', reason: reasonOf(answer.body) };
    return unexpected(answer);
  }

  async confirm(intentId: string, inquiryRef: string): Promise<ConfirmResult> {
    const path = `/v1/payouts/${encodeURIComponent(intentId)}/confirm`;
    const answer = await this.call('confirm', 'POST', path, { inquiryRef }, this.settings.confirmAttemptsMax);
    if (answer.kind === 'unknown') return answer;
    if (answer.status !== 200) return unexpected(answer);
    const { result, settlementDate } = answer.body;
    if (result === 'COMPLETED' && isSettlementDate(settlementDate)) return { kind: 'completed', settlementDate };
    if (result === 'PENDING') return { kind: 'pending' };
    if (result === 'REJECTED') return { kind: 'rejected', reason: reasonOf(answer.body) };
    return unexpected(answer);
  }

  async statusInquiry(intentId: string): Promise<StatusResult> {
    const answer = await this.call('status', 'GET', `/v1/payouts/${encodeURIComponent(intentId)}`, undefined, this.settings.attemptsMax);
    if (answer.kind === 'unknown') return answer;
    if (answer.status === 404) return { kind: 'not_found' };
    if (answer.status !== 200) return unexpected(answer);
    const { status, settlementDate } = answer.body;
    if (status === 'COMPLETED' && isSettlementDate(settlementDate)) return { kind: 'completed', settlementDate };
    if (status === 'PENDING') return { kind: 'pending' };
    if (status === 'FAILED') return { kind: 'failed', reason: reasonOf(answer.body) };
    return unexpected(answer);
  }

  async partnerBalance(): Promise<BalanceResult> {
    const answer = await this.call('balance', 'GET', '/v1/partner/balance', undefined, this.settings.attemptsMax);
    if (answer.kind === 'unknown') return answer;
    const { balance } = answer.body;
    if (answer.status === 200 && typeof balance === 'string' && /^-?[0-9]{1,30}$/.test(balance))
      return { kind: 'ok', balance: BigInt(balance) };
    return unexpected(answer);
  }

  async statement(date: string, sink: StatementSink): Promise<StatementResult> {
    const path = `/v1/statements/${encodeURIComponent(date)}`;
    return this.withRetries('statement', path, this.settings.attemptsMax, async () => {
      await sink.begin();
      return streamStatement({ url: `${this.baseUrl}${path}`, date, idleTimeoutMs: this.settings.timeoutMs, sink });
    });
  }

  private call(
    operation: PspxOperation,
    method: 'GET' | 'POST',
    path: string,
    body: unknown,
    attemptsMax: number,
    headers: Record<string, string> = {},
  ): Promise<Attempt> {
    return this.withRetries(operation, path, attemptsMax, () => this.attempt(method, path, body, headers));
  }

  /** Retries only `unknown` attempts (never an answer), with full-jitter exponential backoff, behind the breaker. */
  private async withRetries<A extends { readonly kind: string }>(
    operation: PspxOperation,
    path: string,
    attemptsMax: number,
    send: () => Promise<A | Unknown>,
  ): Promise<A | Unknown> {
    let last: A | Unknown = unknown('network', 'no attempt made');
    for (let attempt = 0; attempt < attemptsMax; attempt += 1) {
      if (attempt > 0) await sleep(this.backoffMs(attempt));
      if (!this.breaker.tryAcquire()) return unknown('circuit_open', `PSPX circuit open; ${path} not sent`);
      const startedAt = performance.now();
      last = await send();
      this.observeAttempt(operation, isUnknown(last) ? (last.cause as AttemptOutcome) : 'answer', (performance.now() - startedAt) / 1000);
      if (!isUnknown(last)) {
        this.breaker.onSuccess();
        return last;
      }
      this.breaker.onFailure();
    }
    return last;
  }

  private backoffMs(attempt: number): number {
    const ceilingMs = Math.min(this.settings.backoffCapMs, this.settings.backoffBaseMs * 2 ** (attempt - 1));
    return Math.floor(this.settings.random() * ceilingMs);
  }

  private async attempt(method: 'GET' | 'POST', path: string, body: unknown, headers: Record<string, string>): Promise<Attempt> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.settings.timeoutMs),
      });
    } catch (error) {
      const name = error instanceof Error ? error.name : '';
      if (name === 'TimeoutError' || name === 'AbortError')
        return unknown('timeout', `${method} ${path} exceeded ${this.settings.timeoutMs} ms`);
      return unknown('network', `${method} ${path}: ${error instanceof Error ? error.message : String(error)}`);
    }
    // The body is read under the same time-out: a provider that stalls mid-body is as unknown as one that never answers.
    let text: string;
    try {
      text = await response.text();
    } catch {
      return unknown('timeout', `${method} ${path}: body not received within ${this.settings.timeoutMs} ms`);
    }
    if (response.status >= 500) return unknown('http_5xx', `${method} ${path} answered ${response.status}`, response.status);
    const parsed = parseObject(text);
    if (parsed === null) return unknown('bad_response', `${method} ${path} answered ${response.status} without a JSON object`);
    return { kind: 'answer', status: response.status, body: parsed };
  }
}

export function createPspxClient(options: PspxClientOptions): HttpPspxClient {
  return new HttpPspxClient(options);
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function parseObject(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const reasonOf = (body: Record<string, unknown>) => (typeof body.reason === 'string' ? body.reason : 'unspecified');

const isSettlementDate = (value: unknown): value is string => typeof value === 'string' && /^[0-9]{8}$/.test(value);

/** An answer outside the contract: the provider's state is not known from it. */
const unexpected = (answer: { status: number; body: Record<string, unknown> }): Unknown =>
  unknown('bad_response', `unexpected answer ${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`);
