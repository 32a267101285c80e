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

/** Accounts that belong to nobody may go negative; the rest may not be overdrawn (docs/rules.md R19). */
export const UNOWNED_ACCOUNT_TYPES: readonly AccountType[] = ['TRANSIT', 'REVENUE', 'NOSTRO', 'EQUITY'];

export const STEP_UP_LEVELS = ['NONE', 'PIN', 'BIOMETRIC', 'OTP', 'KYC_UPLIFT', 'BLOCK'] as const;
export type StepUpLevel = (typeof STEP_UP_LEVELS)[number];

export const ENTITY_TYPES = ['user', 'merchant', 'agent'] as const;
export type EntityType = (typeof ENTITY_TYPES)[number];

