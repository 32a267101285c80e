import type { PspxClient, WalletCustomer } from '../../adapters/pspx/pspx-client.js';
import type { Sql } from '../../adapters/database.js';
import { userWalletName } from './account-names.js';
import { findAccount } from './accounts.js';
import { apiError, assertNever } from '../errors.js';

export interface WalletRegistration {
  readonly walletId: string;
  readonly alreadyRegistered: boolean;
}

/**
 * Registers the user's THB wallet with PSPX once. The provider call is keyed by the account's
 * ledger id, so a retry after a lost answer, or a concurrent second request, gets the same
 * provider wallet; the conditional update lets exactly one request store it.
 */
export async function registerPspxWallet(
  deps: { readonly sql: Sql; readonly pspx: PspxClient },
  userId: number,
  customer: WalletCustomer,
): Promise<WalletRegistration> {
  const account = await findAccount(deps.sql, userWalletName(userId, 'THB'));
  if (account === null || account.accountType !== 'USER_WALLET') throw apiError('NOT_FOUND', `user ${userId} has no THB wallet`);
  if (account.pspxWalletId !== null) return { walletId: account.pspxWalletId, alreadyRegistered: true };

  const result = await deps.pspx.registerWallet(`wallet-${account.ledgerAccountId}`, customer);
  switch (result.kind) {
    case 'registered':
      return storeWalletId(deps.sql, account.accountName, result.walletId);
    case 'rejected':
      throw apiError('VALIDATION_ERROR', `PSPX refused the registration: ${result.reason}`);
    case 'unknown':
      throw apiError('PSPX_UNAVAILABLE', `PSPX did not answer the registration (${result.cause}); retrying is safe`);
    default:
      return assertNever(result);
  }
}

async function storeWalletId(sql: Sql, accountName: string, walletId: string): Promise<WalletRegistration> {
  const updated = await sql.query('UPDATE accounts SET pspx_wallet_id = $1 WHERE account_name = $2 AND pspx_wallet_id IS NULL', [
    walletId,
    accountName,
  ]);
  if (updated.rowCount === 1) return { walletId, alreadyRegistered: false };
  // A concurrent request stored first: its wallet id is the one of record, so both answers name it.
  const stored = (await findAccount(sql, accountName))?.pspxWalletId ?? null;
  if (stored === null) throw new Error(`pspx_wallet_id of ${accountName} neither updated nor set`);
  return { walletId: stored, alreadyRegistered: true };
}
