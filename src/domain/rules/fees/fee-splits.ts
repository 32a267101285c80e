import type { RawFeeSplit } from './sandbox.js';

export type FeeSplit = { readonly account: string; readonly amount: bigint };

/**
 * Floors each split FIRST, then sums splits of one account (docs/rules.md R31): two splits of 10.6 on one
 * account make 20, not 21. Accounts keep the order of their first appearance; accounts whose
 * sum is zero are dropped, since a zero split moves no money.
 */
export function floorAndSum(splits: Iterable<RawFeeSplit | FeeSplit>): FeeSplit[] {
  const totals = new Map<string, bigint>();
  for (const split of splits) {
    const amount = typeof split.amount === 'bigint' ? split.amount : BigInt(Math.floor(split.amount));
    totals.set(split.account, (totals.get(split.account) ?? 0n) + amount);
  }
  return [...totals].filter(([, amount]) => amount > 0n).map(([account, amount]) => ({ account, amount }));
}

export function sumSplits(splits: readonly FeeSplit[]): bigint {
  return splits.reduce((total, split) => total + split.amount, 0n);
}
