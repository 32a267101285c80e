import { ledgerAccountId } from '../../ledger/account-id.js';
import { LEDGER_THB, TransferFlags, type TransferInput } from '../../ledger/ledger.js';
import { transitAccountName } from '../channels/channels.js';
import { LEDGER_CODE_REFUND } from '../model.js';
import type { Intent } from '../intents/store/intent-store.js';
import { transferId } from '../intents/money/money-path.js';

/**
 * docs/rules.md R57, a refund's money as ledger transfers: the original's flow backwards. A pending
 * transfer reserves `amount` from the original's to-account into its channel's transit account
 * (the to-account's balance guard decides here), then one linked chain posts it, pays it from
 * transit to the original's from-account, and returns each fee share from its fee account to the
 * from-account. Transfer ids derive from the refund's id, so each names its refund, and through
 * it the original (refunds.transfer_ids).
 */
export function refundTransfers(
  refundId: string,
  original: Pick<Intent, 'fromAccountName' | 'toAccountName' | 'channel' | 'currency' | 'feeSplits'>,
  amount: bigint,
  shares: readonly bigint[],
  timeoutS: number,
): TransferInput[] {
  if (original.fromAccountName === null) throw new Error('a refund needs the original to have a from-account');
  const from = ledgerAccountId(original.fromAccountName);
  const transit = ledgerAccountId(transitAccountName(original.channel, original.currency));
  const code = LEDGER_CODE_REFUND;
  const reserve: TransferInput = {
    id: transferId(refundId, 'reserve'),
    debitAccountId: ledgerAccountId(original.toAccountName),
    creditAccountId: transit,
    amount,
    timeoutS,
    ledger: LEDGER_THB,
    code,
    flags: TransferFlags.pending,
  };
  const chain: TransferInput[] = [
    { id: transferId(refundId, 'post'), pendingId: reserve.id, ledger: LEDGER_THB, code, flags: TransferFlags.postPendingTransfer },
    {
      id: transferId(refundId, 'credit'),
      debitAccountId: transit,
      creditAccountId: from,
      amount,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    },
  ];
  shares.forEach((share, index) => {
    const split = original.feeSplits[index];
    if (share === 0n || split === undefined) return;
    chain.push({
      id: transferId(refundId, `fee/${index}`),
      debitAccountId: ledgerAccountId(split.account),
      creditAccountId: from,
      amount: share,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    });
  });
  return [reserve, ...chain.map((leg, index) => (index < chain.length - 1 ? { ...leg, flags: leg.flags | TransferFlags.linked } : leg))];
}

/** Release a refund's reservation when its chain was refused. */
export function refundVoid(refundId: string): TransferInput {
  return {
    id: transferId(refundId, 'void'),
    pendingId: transferId(refundId, 'reserve'),
    ledger: LEDGER_THB,
    code: LEDGER_CODE_REFUND,
    flags: TransferFlags.voidPendingTransfer,
  };
}
