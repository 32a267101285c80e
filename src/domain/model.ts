/** The vocabulary of the specification, exact. */

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

/**
 * The ledger `code` of each operation type's transfers. Codes are stored with every transfer, so a
 * number never changes and is never reused; a new type takes the next free one.
 */
export const LEDGER_CODE_BY_OPERATION = {
  P2P_TRANSFER: 1,
  PSPX_WITHDRAWAL: 2,
  THAI_QR_PAY: 3,
  WITHDRAWAL: 4,
  QP_TOPUP: 5,
  MINIAPP_CHARGE: 6,
  MINIAPP_CREDIT: 7,
  SERVICE_DEPOSIT: 8,
  ADMIN_TRANSFER: 9,
  INVOICE_PAYMENT: 10,
  NFC_CHARGE: 11,
} as const satisfies Record<OperationType, number>;

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

/**
 * The ledger `code` of each account type's ledger account. Stored with every account, and compared
 * when an account is created again ('exists_with_different_code'), so a number never changes and
 * is never reused.
 */
export const LEDGER_CODE_BY_ACCOUNT_TYPE = {
  USER_WALLET: 1,
  TRANSIT: 2,
  REVENUE: 3,
  NOSTRO: 4,
  MERCHANT_WALLET: 5,
  MERCHANT_SETTLEMENT: 6,
  AGENT_WALLET: 7,
  AGENT_SETTLEMENT: 8,
  SERVICE_ACCOUNT: 9,
  EQUITY: 10,
} as const satisfies Record<AccountType, number>;

/** Accounts that belong to nobody may go negative; the rest may not be overdrawn (docs/rules.md R19). */
export const UNOWNED_ACCOUNT_TYPES: readonly AccountType[] = ['TRANSIT', 'REVENUE', 'NOSTRO', 'EQUITY'];

export const STEP_UP_LEVELS = ['NONE', 'PIN', 'BIOMETRIC', 'OTP', 'KYC_UPLIFT', 'BLOCK'] as const;
export type StepUpLevel = (typeof STEP_UP_LEVELS)[number];

export const ENTITY_TYPES = ['user', 'merchant', 'agent'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];
