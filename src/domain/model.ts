/**
 * The vocabulary of the specification, exact. The lists themselves are the client package's
 * (packages/client/src/vocabulary.ts), so the client types requests with the same words the
 * service validates; what only the service needs (ledger codes) is here.
 */
import type { AccountType, OperationType } from '@payorch/client';

export {
  ACCOUNT_TYPES,
  type AccountType,
  CHANNELS,
  type Channel,
  ENTITY_TYPES,
  type EntityType,
  FINAL_STATUSES,
  INTENT_STATUSES,
  type IntentStatus,
  OPERATION_TYPES,
  type OperationType,
  STEP_UP_LEVELS,
  type StepUpLevel,
} from '@payorch/client';

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

/**
 * The PSPX payouts (docs/rules.md, Operation table): a registered PSPX wallet and a receiver block
 * `metadata.ipps`; the types the PSPX_TRANSFER channel carries, and a key needs one of them to
 * register a wallet (POST /accounts/register-ipps).
 */
export const PSPX_OPERATION_TYPES = ['PSPX_WITHDRAWAL', 'THAI_QR_PAY'] as const satisfies readonly OperationType[];
export const isPspxOperationType = (operationType: string): boolean => PSPX_OPERATION_TYPES.some((type) => type === operationType);

/** Accounts that belong to nobody may go negative; the rest may not be overdrawn (docs/rules.md R19). */
export const UNOWNED_ACCOUNT_TYPES: readonly AccountType[] = ['TRANSIT', 'REVENUE', 'NOSTRO', 'EQUITY'];
