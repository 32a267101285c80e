/** The interface's vocabulary, exact (docs/rules.md, Vocabulary). */

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

/** Payments from a user's wallet to the PSPX nostro, the only ones a PSPX payout can complete. */
const PSPX_PAYOUT_TYPES: readonly string[] = ['PSPX_WITHDRAWAL', 'THAI_QR_PAY', 'WITHDRAWAL'];

/**
 * Whether a route may send this operation type to this channel (docs/design.md, "Requests"). Each
 * channel's money path assumes a shape: an invoice has no payer until it is confirmed, so only
 * MERCHANT_INVOICE can carry INVOICE_PAYMENT and it carries nothing else (an invoice settled by
 * a synchronous channel would be SETTLED with no money moved; a payment held as an invoice would
 * keep its reservation with no one to confirm it); a PSPX payout needs a payer wallet and a
 * receiver block. The synchronous channels carry everything else.
 */
export function channelCarries(channel: Channel, operationType: string): boolean {
  if (channel === 'MERCHANT_INVOICE' || operationType === 'INVOICE_PAYMENT') return channel === 'MERCHANT_INVOICE' && operationType === 'INVOICE_PAYMENT';
  if (channel === 'PSPX_TRANSFER') return PSPX_PAYOUT_TYPES.includes(operationType);
  return true;
}

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

/** docs/rules.md R17: the transit account that holds an intent's reservation, per channel. */
export const TRANSIT_OF_CHANNEL: Readonly<Record<Channel, string>> = {
  INTERNAL_P2P: 'INTERNAL_P2P',
  PSPX_TRANSFER: 'PSPX',
  MERCHANT_INVOICE: 'MERCHANT_INVOICE',
  SERVICE_TRANSFER: 'SERVICE_TRANSFER',
  ADMIN: 'INTERNAL',
};

export const transitAccountName = (channel: Channel, currency: string) =>
  `system.transit.${TRANSIT_OF_CHANNEL[channel]}.${currency}`;
