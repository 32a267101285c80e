/**
 * Request and response shapes of the interface, as on the wire: money goes in as a JSON integer
 * of satang and comes out as a decimal string (`Money`), so no amount passes through a float on
 * the way back. The vocabulary (statuses, operation types, ...) is ./vocabulary.ts, which the
 * service imports too. The service validates request bodies and admin records with schemas of its
 * own; a type test in the service's repository (test/unit/client-wire-types.test.ts) holds those
 * schemas and the types here to the same shape, so client and server cannot drift apart.
 */
import type {
  AccountType,
  AuditCheck,
  Channel,
  EntityType,
  FeeTiming,
  IntentStatus,
  LimitDirection,
  LimitType,
  LimitWindow,
  OperationType,
  StepUpLevel,
} from './vocabulary.js';

/** Satang as a decimal string. */
export type Money = string;
export type Metadata = Readonly<Record<string, unknown>>;

// Health -------------------------------------------------------------------------------------------

export type Health =
  | { readonly status: 'ok'; readonly version: string; readonly timestamp: string }
  | { readonly status: 'ko'; readonly message: string };

// Intents ------------------------------------------------------------------------------------------

/** BaseIntentBody; `idempotencyKey` may be left out: the client then generates one, once per call. */
export type IntentCreateRequest = Readonly<Omit<IntentInput, 'idempotencyKey'> & { idempotencyKey?: string }>;

/** The body of POST /intents as the service validates it. */
export interface IntentInput {
  /** UUID version 4. */
  readonly idempotencyKey: string;
  readonly operationType: OperationType;
  /** Satang, 1 to Number.MAX_SAFE_INTEGER. */
  readonly amount: number;
  /** Three upper-case letters; default THB. */
  readonly currency?: string;
  /** Default {}. */
  readonly metadata?: Metadata;
  readonly fromAccountName?: string;
  readonly toAccountName?: string;
  readonly toLedgerAccountId?: string;
  readonly fromName?: string;
  readonly toName?: string;
  readonly comment?: string;
  readonly live?: boolean;
  readonly externalRef?: string;
  readonly recipientUserId?: number;
}

export interface IntentCreated {
  readonly intentId: string;
  readonly status: IntentStatus;
  readonly channel: Channel;
  /** Only on a replay (200). */
  readonly amount?: Money;
  /** Only on a replay (200). */
  readonly currency?: string;
  readonly preFeeAmount: Money;
  readonly postFeeAmount: Money;
  readonly requiresMonitoring: boolean;
  readonly createdAt: string;
  /** MERCHANT_INVOICE only. */
  readonly expiresAt?: string;
  /** MERCHANT_INVOICE only, base64url. */
  readonly qrSignature?: string;
  readonly version: number;
}

export interface Intent {
  readonly intentId: string;
  readonly status: IntentStatus;
  readonly operationType: OperationType;
  readonly channel: Channel;
  readonly amount: Money;
  readonly currency: string;
  readonly preFeeAmount: Money;
  readonly postFeeAmount: Money;
  readonly fromAccount: string | null;
  readonly toAccount: string;
  readonly failureReason: string | null;
  readonly version: number;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** The sum of the intent's SETTLED refunds (GET /intents/{id} only). */
  readonly refundedAmount?: Money;
}

/** POST /intents/{id}/refunds (docs/rules.md R57). Without an idempotencyKey the client makes one. */
export interface RefundCreateRequest {
  readonly idempotencyKey?: string;
  /** Satang; absent: all that remains refundable. */
  readonly amount?: number;
  /** 1–100 characters. */
  readonly reason: string;
  /** Also return the original's fees, in proportion (default false). */
  readonly refundFees?: boolean;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

export interface Refund {
  readonly refundId: string;
  readonly intentId: string;
  readonly amount: Money;
  readonly feeAmount: Money;
  readonly currency: string;
  readonly status: 'SETTLED' | 'FAILED';
  readonly reason: string;
  readonly failureReason: string | null;
  readonly requestedByUserId: number;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface Refunds {
  readonly refunds: readonly Refund[];
}

export interface IntentEvent {
  readonly id: number;
  /** null only for the creation event. */
  readonly statusFrom: string | null;
  /** An intent status or a PSP sub-state (QUERY_PENDING, INQUIRING, ...). */
  readonly statusTo: string;
  readonly reason: string | null;
  readonly payload: Readonly<Record<string, unknown>> | null;
  readonly createdAt: string;
}

/** One event of GET /intents/{id}/stream. */
export interface IntentStatusMessage {
  readonly intentId: string;
  readonly status: IntentStatus;
  readonly updatedAt: string;
}

export interface IntentEvents {
  readonly events: readonly IntentEvent[];
}

/** The fee part of an intent body. */
export interface QuoteRequest {
  /** NFC_CHARGE has no quote. */
  readonly operationType: Exclude<OperationType, 'NFC_CHARGE'>;
  readonly amount: number;
  readonly currency?: string;
  readonly metadata?: Metadata;
}

export interface FeeSplit {
  readonly account: string;
  readonly amount: Money;
}

export interface Quote {
  readonly fee: Money;
  readonly totalCharge: Money;
  readonly breakdown: readonly FeeSplit[];
}

export interface ConfirmRequest {
  readonly payerLedgerAccountId: string;
  readonly payerUserId: number;
  /** Generated by the client when absent, like the one of POST /intents. */
  readonly idempotencyKey?: string;
}

export interface ConfirmResult {
  readonly intentId: string;
  /** SETTLED, or FAILED when the payer lacks funds or a limit blocks. */
  readonly status: IntentStatus;
  readonly channel: Channel;
  readonly createdAt: string;
  readonly version: number;
  readonly replayed: boolean;
}

export interface CancelRequest {
  /** 1 to 50 characters; the service's default is `merchant_canceled`. */
  readonly reason?: string;
}

export interface CancelResult {
  readonly intentId: string;
  readonly status: 'CANCELED';
  readonly channel: Channel;
  readonly preFeeAmount: Money;
  readonly postFeeAmount: Money;
  readonly requiresMonitoring: boolean;
  readonly createdAt: string;
}

// Accounts -----------------------------------------------------------------------------------------

export interface AccountCreateRequest {
  readonly userId: number;
  readonly currency?: 'THB';
  readonly entityType?: EntityType;
}

export interface UserAccount {
  readonly accountName: string;
  readonly ledgerAccountId: string;
}

export interface EntityAccount extends UserAccount {
  readonly created: boolean;
}

/** A merchant or an agent gets a wallet and a settlement account. */
export interface EntityAccounts {
  readonly primary: EntityAccount;
  readonly settlement: EntityAccount;
}

export type AccountCreated = UserAccount | EntityAccounts;

export interface Balance {
  readonly accountName: string;
  readonly balance: Money;
  readonly currency: string;
  /** The instant asked for, as given: only on a balance at a time (docs/rules.md R58). */
  readonly at?: string;
}

export interface HistoryQuery {
  /** 1 to 100, default 20. */
  readonly limit?: number;
  readonly offset?: number;
}

export interface Transaction {
  readonly id: number;
  readonly intentId: string;
  readonly operationType: OperationType;
  readonly direction: 'DEBIT' | 'CREDIT';
  readonly amount: Money;
  readonly feeAmount: Money;
  readonly currency: string;
  readonly createdAt: string;
  /** The account's balance after this posting; null on accounts no user owns. */
  readonly balanceAfter: Money | null;
}

export interface Transactions {
  readonly transactions: readonly Transaction[];
}

/** docs/rules.md R58: instants are ISO 8601 with an offset; the range is [from, to). */
export interface StatementQuery {
  readonly from: string;
  readonly to: string;
}

export interface StatementEntry {
  readonly at: string;
  readonly intentId: string | null;
  readonly refundId: string | null;
  readonly operationType: OperationType | null;
  readonly direction: 'DEBIT' | 'CREDIT';
  /** What the posting moved on the account, its fee included. */
  readonly amount: Money;
  readonly feeAmount: Money;
  readonly balanceAfter: Money;
}

export interface Statement {
  readonly accountName: string;
  readonly currency: string;
  readonly from: string;
  readonly to: string;
  readonly openingBalance: Money;
  readonly closingBalance: Money;
  readonly entries: readonly StatementEntry[];
}

/** The streamed formats: csv, or ISO 20022 camt.053.001.08 XML. */
export type StatementFileFormat = 'csv' | 'camt053';

/** What PSPX needs to open a wallet, passed on as it is. */
export interface IppsRegistrationRequest {
  readonly externalUserId: string;
  readonly customerEnglishName: string;
  /** 13 digits. */
  readonly senderTaxId: string;
  readonly senderAccountName: string;
  readonly senderMobileNumber?: string;
  /** YYYY-MM-DD. */
  readonly documentExpiry: string;
  /** YYYY-MM-DD. */
  readonly dateOfBirth: string;
  readonly phoneNumber: string;
  /** ISO 3166-1 alpha-2. */
  readonly nationality: string;
  readonly address: string;
}

export interface IppsRegistration {
  readonly walletId: string;
  readonly alreadyRegistered: boolean;
}

// Policies -----------------------------------------------------------------------------------------

export interface PolicyEvaluationRequest {
  readonly userId: number;
  readonly merchantId?: number;
  /** satang, digits only */
  readonly amount: string;
  readonly currency: string;
  readonly channel: string;
  readonly appId: string;
  readonly operationType: string;
}

export interface PolicyDecision {
  readonly required: StepUpLevel;
  readonly reasonCode: string;
  /** 0 when no policy matched (docs/rules.md R4). */
  readonly policyId: number;
  readonly context: { readonly dailyCumulative: Money; readonly isNewPayee: boolean };
}

// Admin --------------------------------------------------------------------------------------------

export interface ResolveRequest {
  readonly resolution: 'CONFIRMED' | 'FAILED';
  /** Used with FAILED. */
  readonly reason?: string;
}

export interface ResolveResult {
  readonly intentId: string;
  readonly previousStatus: IntentStatus;
  /** After the call: CONFIRMED stays MANUAL_REVIEW until the queued post_pending job settles it. */
  readonly status: IntentStatus;
  readonly resolution: 'CONFIRMED' | 'FAILED';
  /** The outbox job that finishes the resolution; null when nothing changed. */
  readonly queuedJob: string | null;
}

export interface AuditViolation {
  readonly check: AuditCheck;
  readonly detail: string;
  readonly intentId?: string;
  readonly account?: string;
}

/** A broken invariant is a finding, not a failed request: 200 with ok false. */
export interface AuditResult {
  readonly ok: boolean;
  /** ISO 8601 UTC. */
  readonly checkedAt: string;
  readonly violations: readonly AuditViolation[];
}

/** An intent as operators see it (GET /admin/intents): every service's, with its key and PSP state. */
export interface AdminIntent extends Omit<Intent, 'operationType' | 'channel' | 'status'> {
  readonly serviceId: string;
  readonly idempotencyKey: string;
  readonly userId: number;
  readonly operationType: string;
  readonly channel: string;
  readonly status: string;
  readonly pspState: string | null;
  readonly externalRef: string | null;
  readonly cancelReason: string | null;
  readonly settlementDate: string | null;
  readonly metadata: Metadata;
  readonly expiresAt: string | null;
}

export interface AdminIntentPage {
  readonly intents: readonly AdminIntent[];
  /** Pass as `cursor` for the next page; null on the last one. */
  readonly nextCursor: string | null;
}

export interface IntentFilter {
  readonly status?: IntentStatus;
  readonly operationType?: OperationType;
  readonly channel?: Channel;
  readonly serviceId?: string;
  /** ISO 8601, inclusive. Kept as text: a Date would drop the microseconds the column holds. */
  readonly createdFrom?: string;
  /** ISO 8601, exclusive, so that consecutive windows neither overlap nor leave a gap. */
  readonly createdTo?: string;
}

export interface AdminIntentQuery extends IntentFilter {
  readonly cursor?: string;
  readonly limit?: number;
}

export interface FeeDryRunRequest {
  readonly expression: string;
  readonly context: { readonly operationType: string; readonly amount: number; readonly currency: string; readonly metadata?: Metadata };
}

export interface FeeDryRunResult {
  readonly splits: readonly FeeSplit[];
  readonly totalFee: Money;
}

export interface AdminListQuery {
  /** Only active (true) or inactive (false) records. */
  readonly active?: boolean;
  readonly limit?: number;
  readonly offset?: number;
}

/** A create body: the `Required` fields, the others optional (the service fills in the column defaults). */
type CreateBody<Fields, Required extends keyof Fields> = Readonly<Pick<Fields, Required> & Partial<Omit<Fields, Required>>>;

/** The stored record's extra fields: its id, and an operation type read back as text (a retired type still reads). */
type Stored<Fields> = Readonly<Omit<Fields, 'operationType'> & { id: number; operationType: string; createdAt: string }>;

interface FeeRuleFields {
  name: string;
  operationType: OperationType;
  /** Returns [{account, amount}]. */
  expression: string;
  /** Default PRE. */
  timing: FeeTiming;
  tagsInclude: string[];
  tagsExclude: string[];
  /** Ascending, default 0. */
  priority: number;
  /** Default true; inactive records are ignored. */
  active: boolean;
}
export type FeeRuleInput = CreateBody<FeeRuleFields, 'name' | 'operationType' | 'expression'>;
export type FeeRule = Stored<FeeRuleFields>;

interface RouteFields {
  operationType: OperationType;
  /** Satang, default 1. */
  minAmount: number;
  /** Satang; null (default) is unbounded. */
  maxAmount: number | null;
  channel: Channel;
  /** Ascending: the first route holding the amount wins; default 0. */
  priority: number;
  active: boolean;
}
export type RouteInput = CreateBody<RouteFields, 'operationType' | 'channel'>;
export type Route = Readonly<Omit<Stored<RouteFields>, 'minAmount' | 'maxAmount'> & { minAmount: Money; maxAmount: Money | null }>;

interface LimitRuleFields {
  name: string;
  /** '*' (default) is every operation type. */
  operationType: '*' | OperationType;
  direction: LimitDirection;
  window: LimitWindow;
  limitType: LimitType;
  /** Satang for AMOUNT, intents for COUNT. */
  limit: number;
  /** Default THB. */
  currency: string;
  active: boolean;
}
export type LimitRuleInput = CreateBody<LimitRuleFields, 'name' | 'direction' | 'window' | 'limitType' | 'limit'>;
/** `limit` comes back as a decimal string. */
export type LimitRule = Readonly<Omit<Stored<LimitRuleFields>, 'limit'> & { limit: string }>;

/** Every present key must hold (AND); {} matches everything. Other keys are stored and ignored. */
export interface PolicyCondition {
  amount_lt?: number;
  amount_gte?: number;
  amount_lte?: number;
  currency?: string;
  daily_cumulative_gte?: number;
  new_payee?: boolean;
}

interface AuthPolicyFields {
  /** 'global', 'app:{appId}' or 'merchant:{merchantId}'. */
  scope: string;
  condition: PolicyCondition;
  requiredStepUp: StepUpLevel;
  reasonCode: string;
  /** Ascending, default 100. */
  priority: number;
  active: boolean;
}
export type AuthPolicyInput = CreateBody<AuthPolicyFields, 'scope' | 'requiredStepUp' | 'reasonCode'>;
export type AuthPolicy = Readonly<AuthPolicyFields & { id: number; createdAt: string; updatedAt: string }>;

interface AccountOverride {
  allowedTypes: AccountType[];
  namePattern: string;
}

/** What a service key may do. */
export interface Permissions {
  allowedOperationTypes: string[];
  merchantId?: number;
  forceResolve?: boolean;
  admin?: boolean;
  allowToLedgerAccountId?: boolean;
  fromAccountOverride?: AccountOverride;
  toAccountOverride?: AccountOverride;
  accountEntityTypes?: EntityType[];
  /** Refuse the older X-Signature for this key: only RFC 9421 message signatures verify. */
  requireMessageSignatures?: boolean;
  /** A token bucket per service id: `requestsPerSecond` refill, `burst` capacity. Absent: no limit. */
  rateLimit?: { requestsPerSecond: number; burst: number };
  /** Where the service's events are POSTed, signed with its secret; http or https, no credentials. */
  webhook?: { url: string };
}

/** The secret is set in the service's CONFIG_FILE, never through the API. */
export interface ServiceKeyInput {
  readonly serviceId: string;
  readonly permissions: Permissions;
  readonly active?: boolean;
}

/** A JSON merge patch (RFC 7396) of `T`: an absent field keeps its value, null removes it, a nested object merges field by field. */
type MergePatchOf<T> = {
  [K in keyof T]?: NonNullable<T[K]> extends readonly unknown[]
    ? T[K] | null
    : NonNullable<T[K]> extends object
      ? MergePatchOf<NonNullable<T[K]>> | null
      : T[K] | null;
};

/** `permissions` is merged into the stored permissions (RFC 7396); `allowedOperationTypes` cannot be removed. */
export interface ServiceKeyPatch {
  readonly permissions?: MergePatchOf<Omit<Permissions, 'allowedOperationTypes'>> & { allowedOperationTypes?: string[] };
  readonly active?: boolean;
}

/** The key record only: secrets never leave the service. */
export interface ServiceKey {
  readonly serviceId: string;
  readonly active: boolean;
  readonly permissions: Permissions;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface LogLevel {
  readonly level: string;
  readonly previous?: string;
}

/** A webhook delivery that is dead after the 72 h retry window (GET /admin/webhooks/dead). */
export interface DeadWebhook {
  readonly cursor: string;
  readonly serviceId: string;
  readonly intentId: string;
  readonly attempts: number;
  readonly firstAttemptAt: string | null;
  readonly lastAttemptAt: string | null;
  readonly deadAt: string;
  /** `http_error`, `timeout`, `network_error` or `no_secret`. */
  readonly lastOutcome: string | null;
  readonly lastHttpStatus: number | null;
  /** Later events of the same intent waiting behind this one. */
  readonly heldBack: number;
  /** The event as POSTed. */
  readonly event: unknown;
}

export interface DeadWebhookQuery {
  readonly serviceId?: string;
  readonly limit?: number;
  readonly offset?: number;
}

/** POST /admin/webhooks/dead/{cursor}/redeliver: the delivery is due again now. */
export interface WebhookRedelivery {
  readonly cursor: string;
  readonly serviceId: string;
  readonly intentId: string;
}

/** One status change of an intent of the calling service, from the event feed (GET /events). */
export interface FeedEvent {
  /** Opaque; pass it as `after` to go on right behind this event. Store it to resume later. */
  readonly cursor: string;
  /** `intent`: a status change of the intent; `refund`: a refund of it (statusFrom null, statusTo the refund's status, amount the refund's). */
  readonly type: 'intent' | 'refund';
  /** On refund events only. */
  readonly refundId?: string;
  readonly intentId: string;
  readonly operationType: OperationType;
  /** null for the creation. */
  readonly statusFrom: IntentStatus | null;
  readonly statusTo: IntentStatus;
  /** Satang, as a decimal string. */
  readonly amount: string;
  readonly currency: string;
  readonly occurredAt: string;
}

export interface EventPage {
  readonly events: readonly FeedEvent[];
  /** Always present: the next page's `after` (the end of the feed when this page was not full). */
  readonly nextCursor: string;
}

export interface EventQuery {
  /** A cursor already read; absent: from the oldest event kept. */
  readonly after?: string;
  /** 1..500, default 100. */
  readonly limit?: number;
}
