import { describe, expect, it } from 'vitest';
import type { AccountLookup, AccountRecord } from '../../src/domain/accounts/accounts.js';
import { ApiError } from '../../src/domain/errors.js';
import type { FeeResult } from '../../src/domain/rules/fees/index.js';
import { feeLegs } from '../../src/domain/intents/create/fee-calculation.js';
import { ledgerAccountId } from '../../src/ledger/account-id.js';

/** A lookup over a set of existing account names that records every read it answers. */
function recordingLookup(existing: Set<string>) {
  const reads: string[][] = [];
  const lookup: AccountLookup = async (names) => {
    reads.push([...names]);
    // Like the shared read: the answer also holds accounts other requests asked for.
    const answered = [...names, 'user.9.THB'].filter((name) => existing.has(name));
    return new Map(answered.map((name) => [name, { accountName: name, ledgerAccountId: ledgerAccountId(name) } as AccountRecord]));
  };
  return { lookup, reads };
}

function feesTo(...accounts: string[]): FeeResult {
  const splits = accounts.map((account) => ({ account, amount: 1n }));
  return { preFee: BigInt(splits.length), postFee: 0n, preSplits: splits, postSplits: [], splits };
}

describe('feeLegs', () => {
  it('reads a fee account once: later payments with a fee to it make no read for it', async () => {
    const { lookup, reads } = recordingLookup(new Set(['system.revenue.THB', 'user.9.THB']));
    const legs = [];
    for (let i = 0; i < 3; i += 1) legs.push(await feeLegs(lookup, feesTo('system.revenue.THB', 'system.revenue.THB')));
    expect(reads).toEqual([['system.revenue.THB']]);
    for (const leg of legs) expect(leg).toEqual([1, 2].map(() => ({ ledgerAccountId: ledgerAccountId('system.revenue.THB'), amount: 1n })));
  });

  it('looks a missing fee account up every time: 422 ACCOUNT_NOT_FOUND until it exists, then found at once', async () => {
    const existing = new Set(['system.revenue.THB']);
    const { lookup, reads } = recordingLookup(existing);
    const attempt = () => feeLegs(lookup, feesTo('system.revenue.THB', 'system.fees.partner.THB'));
    for (let i = 0; i < 2; i += 1) {
      const error = await attempt().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ApiError);
      expect(error).toMatchObject({ code: 'ACCOUNT_NOT_FOUND' });
    }
    existing.add('system.fees.partner.THB');
    expect((await attempt()).map((leg) => leg.ledgerAccountId)).toEqual([
      ledgerAccountId('system.revenue.THB'),
      ledgerAccountId('system.fees.partner.THB'),
    ]);
    expect(reads).toEqual([['system.revenue.THB', 'system.fees.partner.THB'], ['system.fees.partner.THB'], ['system.fees.partner.THB']]);
  });

  it('keeps only the names it asked for, not the other accounts a shared read answered', async () => {
    const { lookup, reads } = recordingLookup(new Set(['system.revenue.THB', 'user.9.THB']));
    await feeLegs(lookup, feesTo('system.revenue.THB'));
    // user.9.THB came back with the first read, unasked: the second payment still reads it.
    const legs = await feeLegs(lookup, feesTo('user.9.THB'));
    expect(reads).toEqual([['system.revenue.THB'], ['user.9.THB']]);
    expect(legs).toEqual([{ ledgerAccountId: ledgerAccountId('user.9.THB'), amount: 1n }]);
  });
});
