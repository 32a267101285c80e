import type { Sql } from '../adapters/database.js';
import { DatabaseError } from '../adapters/database-error.js';

/**
 * The ledger keeps TigerBeetle's semantics: accounts hold four counters, transfers move an amount
 * from a debit account to a credit account, pending transfers reserve until posted, voided or
 * timed out, and a chain of `linked` transfers applies all-or-nothing. This interface is what a
 * TigerBeetle backend would implement; the SQL backend lives in the same database as the intents
 * so that a ledger movement and the status change that needs it commit together.
 */

/** Only THB exists for now; ledger numbers separate currencies as in TigerBeetle. */
export const LEDGER_THB = 1;

/**
 * A COMMIT refused by balance history's stamp check (sql/ledger/13-history.sql, SQLSTATE LDG02):
 * the transaction stalled for more than 2 s between its ledger write and its COMMIT, and rolled
 * back whole. The COMMIT was answered, so nothing of it is stored, and the same work may run again
 * at once with fresh stamps (docs/rules.md R58).
 */
export const isStampRefusal = (error: unknown): boolean => error instanceof DatabaseError && error.code === 'LDG02';

export const AccountFlags = {
  none: 0,
  linked: 1 << 0,
  /** Guarded account: debits pending + debits posted may never exceed credits posted. */
  debitsMustNotExceedCredits: 1 << 1,
  creditsMustNotExceedDebits: 1 << 2,
  /** Keeps the balance after each posting, with its time (docs/rules.md R58); guarded accounts only. */
  history: 1 << 3,
} as const;

export const TransferFlags = {
  none: 0,
  /** This transfer and the next one succeed or fail together; the last of a chain has it unset. */
  linked: 1 << 0,
  pending: 1 << 1,
  postPendingTransfer: 1 << 2,
  voidPendingTransfer: 1 << 3,
} as const;

export interface AccountInput {
  readonly id: string; // UUID
  readonly ledger: number;
  readonly code: number;
  readonly flags: number;
}

export interface Account extends AccountInput {
  readonly debitsPending: bigint;
  readonly debitsPosted: bigint;
  readonly creditsPending: bigint;
  readonly creditsPosted: bigint;
  readonly timestamp: Date;
}

export interface TransferInput {
  readonly id: string; // UUID, the idempotency key of the transfer
  /** For post/void: may be omitted, the pending transfer's accounts are used. */
  readonly debitAccountId?: string;
  readonly creditAccountId?: string;
  /** For a post: omitted means the full pending amount. Must be > 0 otherwise. */
  readonly amount?: bigint;
  readonly pendingId?: string;
  /** Seconds until a pending transfer expires; 0 means never. Only with flags.pending. */
  readonly timeoutS?: number;
  readonly ledger: number;
  readonly code: number;
  readonly flags: number;
  /** TigerBeetle's user_data_128: the intent a transfer belongs to; kept in the balance history only. */
  readonly userData128?: string;
}

export interface Transfer {
  readonly id: string;
  readonly debitAccountId: string;
  readonly creditAccountId: string;
  readonly amount: bigint;
  readonly pendingId: string | null;
  readonly timeoutS: number;
  readonly ledger: number;
  readonly code: number;
  readonly flags: number;
  readonly timestamp: Date;
  /** For a pending transfer: whether it is still pending, or was posted, voided or expired. */
  readonly pendingStatus: 'pending' | 'posted' | 'voided' | 'expired' | null;
  readonly expiresAt: Date | null;
}

/** TigerBeetle's result names, snake_case as TigerBeetle spells them. */
export const CreateTransferError = [
  'linked_event_failed',
  'linked_event_chain_open',
  'id_must_not_be_zero',
  'exists',
  'exists_with_different_flags',
  'exists_with_different_debit_account_id',
  'exists_with_different_credit_account_id',
  'exists_with_different_amount',
  'exists_with_different_pending_id',
  'exists_with_different_timeout',
  'flags_are_mutually_exclusive',
  'debit_account_id_must_not_be_zero',
  'credit_account_id_must_not_be_zero',
  'accounts_must_be_different',
  'pending_id_must_be_zero',
  'pending_id_must_not_be_zero',
  'pending_id_must_be_different',
  'timeout_reserved_for_pending_transfer',
  'amount_must_not_be_zero',
  'ledger_must_not_be_zero',
  'debit_account_not_found',
  'credit_account_not_found',
  'accounts_must_have_the_same_ledger',
  'transfer_must_have_the_same_ledger_as_accounts',
  'pending_transfer_not_found',
  'pending_transfer_not_pending',
  'pending_transfer_has_different_debit_account_id',
  'pending_transfer_has_different_credit_account_id',
  'pending_transfer_has_different_ledger',
  'exceeds_pending_transfer_amount',
  'pending_transfer_already_posted',
  'pending_transfer_already_voided',
  'pending_transfer_expired',
  'exceeds_credits',
  'exceeds_debits',
] as const;
export type CreateTransferError = (typeof CreateTransferError)[number];

export const CreateAccountError = [
  'id_must_not_be_zero',
  'ledger_must_not_be_zero',
  'flags_are_mutually_exclusive',
  'exists_with_different_flags',
  'exists_with_different_ledger',
  'exists_with_different_code',
  'exists',
] as const;
export type CreateAccountError = (typeof CreateAccountError)[number];

/** As in TigerBeetle, only failures are returned, each with the index of its event. */
export interface CreateTransferResult {
  readonly index: number;
  readonly result: CreateTransferError;
}
export interface CreateAccountResult {
  readonly index: number;
  readonly result: CreateAccountError;
}

/**
 * Every call takes the SQL executor it runs on, so that a caller may include ledger work in its
 * own transaction. A batch is applied in order; a failed transfer outside a chain does not
 * affect the others.
 */
export interface Ledger {
  createAccounts(sql: Sql, accounts: readonly AccountInput[]): Promise<CreateAccountResult[]>;
  createTransfers(sql: Sql, transfers: readonly TransferInput[]): Promise<CreateTransferResult[]>;
  lookupAccounts(sql: Sql, ids: readonly string[]): Promise<Account[]>;
  lookupTransfers(sql: Sql, ids: readonly string[]): Promise<Transfer[]>;
  /** Releases every pending transfer past its timeout; returns the ids it expired. */
  expirePendingTransfers(sql: Sql, batchSizeMax: number): Promise<string[]>;
}
