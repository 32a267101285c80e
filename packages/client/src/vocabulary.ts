/**
 * The words of the interface, exact, here once: the client types its requests with them and the
 * service validates and stores the same lists (it imports them from this package).
 */

export const OPERATION_TYPES = [
  'P2P_TRANSFER',
  'PSPX_WITHDRAWAL',
  'THAI_QR_PAY',
  'WITHDRAWAL',
  'QP_TOPUP',
  'MINIAPP_CHARGE',
  'MINIAPP_CREDIT',
  'SERVICE_DEPOSIT',
  'ADMIN_TRANSFER',
  'INVOICE_PAYMENT',
  'NFC_CHARGE',
] as const;
export type OperationType = (typeof OPERATION_TYPES)[number];

export const CHANNELS = ['INTERNAL_P2P', 'PSPX_TRANSFER', 'MERCHANT_INVOICE', 'SERVICE_TRANSFER', 'ADMIN'] as const;
export type Channel = (typeof CHANNELS)[number];

export const INTENT_STATUSES = [
  'CREATED',
  'VALIDATED',
  'AUTHORIZED',
  'SETTLING',
  'SETTLED',
  'FAILED',
  'MANUAL_REVIEW',
  'CANCELED',
  'EXPIRED',
] as const;
export type IntentStatus = (typeof INTENT_STATUSES)[number];

/** An intent in one of these never changes again: a watcher can stop. */
export const FINAL_STATUSES: readonly IntentStatus[] = ['SETTLED', 'FAILED', 'CANCELED', 'EXPIRED'];

export const ACCOUNT_TYPES = [
  'USER_WALLET',
  'TRANSIT',
  'REVENUE',
  'NOSTRO',
  'MERCHANT_WALLET',
  'MERCHANT_SETTLEMENT',
  'AGENT_WALLET',
  'AGENT_SETTLEMENT',
  'SERVICE_ACCOUNT',
  'EQUITY',
] as const;
export type AccountType = (typeof ACCOUNT_TYPES)[number];

export const STEP_UP_LEVELS = ['NONE', 'PIN', 'BIOMETRIC', 'OTP', 'KYC_UPLIFT', 'BLOCK'] as const;
export type StepUpLevel = (typeof STEP_UP_LEVELS)[number];

export const ENTITY_TYPES = ['user', 'merchant', 'agent'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

/** When a fee rule's fee is taken: before the amount moves (PRE) or out of it (POST). */
export const FEE_TIMINGS = ['PRE', 'POST'] as const;
export type FeeTiming = (typeof FEE_TIMINGS)[number];

export const LIMIT_DIRECTIONS = ['DEBIT', 'CREDIT', 'BOTH'] as const;
export const LIMIT_WINDOWS = ['DAILY', 'MONTHLY', 'PER_TRANSACTION'] as const;
export const LIMIT_TYPES = ['AMOUNT', 'COUNT'] as const;
export type LimitDirection = (typeof LIMIT_DIRECTIONS)[number];
export type LimitWindow = (typeof LIMIT_WINDOWS)[number];
export type LimitType = (typeof LIMIT_TYPES)[number];

/** Names of the invariant audit's checks, stable: the CLI, the admin route and monitoring key on them. */
export const AUDIT_CHECKS = [
  'ledger_balanced',
  'ledger_pending_matches_transfers',
  'ledger_guarded_limits',
  'balance_history_replays',
  'account_map',
  'transit_balanced',
  'guarded_account_negative',
  'settled_postings',
  'in_flight_reservation',
  'unsettled_no_money',
  'audit_trail',
  'audit_trail_status',
  'pending_outlived_timeout',
  'audit_incomplete',
] as const;
export type AuditCheck = (typeof AUDIT_CHECKS)[number];

/**
 * The one catalogue of error codes the interface answers with, each with its HTTP status.
 * Clients decide on `error` alone; `message` is English for logs.
 */
export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  NO_ROUTE: 400,
  CANCEL_NOT_SUPPORTED: 400,
  PAYER_ACCOUNT_USER_MISMATCH: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  UNAUTHORIZED_ACTOR: 403,
  NOT_FOUND: 404,
  INTENT_NOT_FOUND: 404,
  PAYER_ACCOUNT_NOT_FOUND: 404,
  PENDING_EXPIRED: 408,
  CONFLICT: 409,
  TRANSACTION_IN_PROGRESS: 409,
  ALREADY_PROCESSED: 409,
  EXPIRED: 409,
  VERSION_MISMATCH: 409,
  CANNOT_CANCEL: 409,
  /** A feed cursor older than the event retention: the events after it were pruned (docs/EVENTS.md). */
  CURSOR_EXPIRED: 410,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  VALIDATION_ERROR: 422,
  ACCOUNT_NOT_FOUND: 422,
  INSUFFICIENT_FUNDS: 422,
  LIMIT_EXCEEDED: 422,
  PSPX_NOT_REGISTERED: 422,
  PSPX_METADATA_INVALID: 422,
  EVAL_ERROR: 422,
  WRONG_STATUS: 422,
  RATE_LIMITED: 429,
  LEDGER_TRANSFER_ERROR: 500,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  PSPX_UNAVAILABLE: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;
