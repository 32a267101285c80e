import { ledgerAccountId } from '../../ledger/account-id.js';
import { LEDGER_THB, TransferFlags, type TransferInput } from '../../ledger/ledger.js';
import { transitAccountName } from '../channels/channels.js';
import { LEDGER_CODE_REFUND } from '../model.js';
import type { Intent } from '../intents/store/intent-store.js';
import { transferId } from '../intents/money/money-path.js';

/**
 * docs/rules.md R57, a refund's money as ledger transfers: the original's flow backwards. A pending
 * transfer reserves `amount` from the original's to-account into its channel's transit account
 * (the to-account's balance guard decides here), then one linked chain posts it, brings each fee
 * share back from its fee account into transit, and pays amount and shares from transit to the
 * original's from-account. Every transfer carries the original's id as user_data_128. Transfer ids derive from the refund's id, so each names its refund, and through
 * it the original (refunds.transfer_ids).
 */
export function refundTransfers(
  refundId: string,
  original: Pick<Intent, 'id' | 'fromAccountName' | 'toAccountName' | 'channel' | 'currency' | 'feeSplits'>,
  amount: bigint,
  shares: readonly bigint[],
  timeoutS: number,
): TransferInput[] {
  if (original.fromAccountName === null) throw new Error('a refund needs the original to have a from-account');
  const from = ledgerAccountId(original.fromAccountName);
  const transit = ledgerAccountId(transitAccountName(original.channel, original.currency));
  const code = LEDGER_CODE_REFUND;
  // The original's intent id, as its own transfers carry it: the balance history names the intent
  // of every posting, and a refund's postings are the original's (docs/rules.md R57, R58).
  const userData128 = original.id;
  const ids = refundLegIds(refundId, original.feeSplits.length);
  const reserve: TransferInput = {
    id: ids.reserve,
    debitAccountId: ledgerAccountId(original.toAccountName),
    creditAccountId: transit,
    amount,
    timeoutS,
    userData128,
    ledger: LEDGER_THB,
    code,
    flags: TransferFlags.pending,
  };
  // Fee shares come back through transit too, so that the from-account gets one posting per refund,
  // as the original took one from it: its statement entry and its history row are one posting each
  // (docs/rules.md R58), the fees returned included in its amount.
  const feeLegs: TransferInput[] = [];
  shares.forEach((share, index) => {
    const split = original.feeSplits[index];
    if (share === 0n || split === undefined) return;
    feeLegs.push({
      id: ids.fees[index]!,
      debitAccountId: ledgerAccountId(split.account),
      creditAccountId: transit,
      amount: share,
      userData128,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    });
  });
  const returned = feeLegs.reduce((sum, leg) => sum + (leg.amount ?? 0n), 0n);
  const chain: TransferInput[] = [
    {
      id: ids.post,
      pendingId: reserve.id,
      userData128,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.postPendingTransfer,
    },
    ...feeLegs,
    {
      id: ids.credit,
      debitAccountId: transit,
      creditAccountId: from,
      amount: amount + returned,
      userData128,
      ledger: LEDGER_THB,
      code,
      flags: TransferFlags.none,
    },
  ];
  return [reserve, ...chain.map((leg, index) => (index < chain.length - 1 ? { ...leg, flags: leg.flags | TransferFlags.linked } : leg))];
}

/** The ids of a refund's transfers, fee legs for every split of the original whether its share is 0 or not. */
function refundLegIds(refundId: string, splits: number) {
  return {
    reserve: transferId(refundId, 'reserve'),
    post: transferId(refundId, 'post'),
    fees: Array.from({ length: splits }, (_, index) => transferId(refundId, `fee/${index}`)),
    credit: transferId(refundId, 'credit'),
  };
}

/**
 * What refund_open_batch stores as a refund's transfer ids (sql/refunds): reserve, post, one per
 * fee split, credit, in refundTransfers' order; it leaves out the fee legs of the shares that are 0.
 */
export function refundTransferIdsBySplit(refundId: string, splits: number): string[] {
  const ids = refundLegIds(refundId, splits);
  return [ids.reserve, ids.post, ...ids.fees, ids.credit];
}

/** Release a refund's reservation when its chain was refused. */
export function refundVoid(refundId: string, originalId: string): TransferInput {
  return {
    id: transferId(refundId, 'void'),
    pendingId: transferId(refundId, 'reserve'),
    userData128: originalId,
    ledger: LEDGER_THB,
    code: LEDGER_CODE_REFUND,
    flags: TransferFlags.voidPendingTransfer,
  };
}
