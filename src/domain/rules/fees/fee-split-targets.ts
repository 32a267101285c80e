import { parseAccountName } from '../../accounts/account-names.js';
import type { AccountType } from '../../model.js';
import type { FeeSplit } from './fee-splits.js';

/**
 * Accounts no fee may be paid into (docs/rules.md R62): a transit account must net to zero within
 * every payment, and a nostro account mirrors money held at a provider, so the ledger refuses the
 * settlement of a payment that credits either.
 */
export const FEE_SPLIT_REFUSED_TYPES: readonly AccountType[] = ['TRANSIT', 'NOSTRO'];

/** The first split that pays a refused account, with the account's type; undefined when every split may be paid. */
export function refusedSplitTarget(splits: readonly Pick<FeeSplit, 'account'>[]): { account: string; type: AccountType } | undefined {
  for (const split of splits) {
    const type = parseAccountName(split.account)?.accountType;
    if (type !== undefined && FEE_SPLIT_REFUSED_TYPES.includes(type)) return { account: split.account, type };
  }
  return undefined;
}

export const refusedSplitMessage = (target: { account: string; type: AccountType }) =>
  `fee split pays ${target.account}, a ${target.type} account, which no fee may pay`;
