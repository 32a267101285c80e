import type { Tx } from '../../../adapters/database.js';
import type { Ledger, TransferInput } from '../../../ledger/ledger.js';
import { apiError, assertNever } from '../../errors.js';
import { ledgerResultsPerIntent, moneyOutcomeOf, voidRefusedChains } from '../money/apply-transfers.js';
import { voidTransfer } from '../money/money-path.js';
import { PAYER_LOCK_CLASS, RECIPIENT_LIMIT_LOCK_CLASS, transactionInProgress } from './payer-locks.js';
import type { HistoryRow, Intent, Transition } from '../store/intent-store.js';
import { type InvoiceFees, redeemInvoices } from '../store/intent-batch-writer.js';
import { checkJson, type Guard, type GuardRefusal, limitCheckOf } from './guard.js';

/**
 * Invoice confirms by group commit (docs/design.md#hot-group-commit): the confirms that
 * arrive while earlier ones commit share one transaction. Per batch, whatever its size: BEGIN,
 * one statement that claims the invoices and guards their payers (below), one ledger call with
 * every redemption's transfers (each its own linked chain, so one refusal leaves the others
 * alone), the voids of refused chains when there are any, one statement that writes where every
 * invoice ended with its trail and history, COMMIT.
 *
 * The claim is the race's one decision (docs/rules.md R26): a row lock on each invoice that is
 * still CREATED, unexpired on the database's clock and, with If-Match, at the version the payer
 * saw. A cancel or the expiry sweep that reaches the row first wins, and this confirm finds the
 * row changed; one that comes later waits for this transaction and then finds the invoice paid.
 * The invoice is written once, at the end: its intermediate statuses are never visible outside
 * this transaction, and its trail records them.
 */
export interface ConfirmCommit {
  /** The invoice as read before the transaction. */
  readonly invoice: Intent;
  /** If-Match: the version the payer saw; null: any. */
  readonly expectedVersion: number | null;
  readonly payer: { readonly accountName: string; readonly userId: number };
  readonly confirmIdempotencyKey: string;
  /** Drawn by the confirm request before anything was written; stored with its claim. */
  readonly attemptId: string;
  /** X-User-Id of the confirm, recorded on the claim's event. */
  readonly actor: number;
  readonly fees: InvoiceFees;
  /** `[reserve, ...settlement chain]`. */
  readonly transfers: readonly TransferInput[];
  /** The payer's lock and the limit checks of docs/rules.md R21, compared under the invoice's row lock. */
  readonly guard: Guard;
}

export type ConfirmOutcome =
  /** The invoice was not claimable any more when its row was locked: someone else won, or it expired. */
  { readonly kind: 'lost' } | { readonly kind: 'done'; readonly intent: Intent; readonly transitions: readonly Transition[] };

/**
 * Throws to roll the whole batch back (GroupCommit then commits its confirms one by one): a
 * payer's lock held by another instance (409 TRANSACTION_IN_PROGRESS) and a reservation the
 * ledger refuses for another reason than funds (the invoice stays payable) both refuse the
 * request, which must leave the invoice unclaimed.
 */
export async function commitConfirmBatch(tx: Tx, ledger: Ledger, batch: readonly ConfirmCommit[]): Promise<ConfirmOutcome[]> {
  const claims = await claimBatch(tx, batch);
  const endings: Array<Ending | null> = batch.map(() => null);
  const moving: number[] = [];
  batch.forEach((item, index) => {
    const claim = claims.get(item.invoice.id);
    if (claim === undefined) return;
    if (claim.refusal === null) {
      moving.push(index);
      return;
    }
    if (claim.refusal.refusal === 'locked') throw transactionInProgress(item.payer.userId);
    // docs/rules.md R27: a limit that blocks the payer is the invoice's failure, not the request's error.
    endings[index] = { status: 'FAILED', reason: `limit_exceeded: ${limitCheckOf(claim.refusal, item.guard).rule.name}`, transferIds: [] };
  });
  const resultsOf = await ledgerResultsPerIntent(
    tx,
    ledger,
    moving.map((index) => batch[index]!.transfers),
  );
  const voids: TransferInput[] = [];
  moving.forEach((index, at) => {
    const item = batch[index]!;
    const money = moneyOutcomeOf(resultsOf.get(at) ?? []);
    switch (money.kind) {
      case 'applied':
        endings[index] = { status: 'SETTLED', transferIds: item.transfers.map((t) => t.id) };
        break;
      case 'reservation_refused':
        if (money.failure.result !== 'exceeds_credits')
          throw apiError('LEDGER_TRANSFER_ERROR', `ledger refused the reservation: ${money.failure.result}`);
        endings[index] = { status: 'FAILED', reason: 'insufficient_funds', transferIds: [] };
        break;
      case 'settlement_refused': {
        const refund = voidTransfer(item.invoice.id, item.invoice.operationType);
        voids.push(refund);
        endings[index] = {
          status: 'FAILED',
          reason: money.reason,
          transferIds: [item.transfers[0]!.id, refund.id],
        };
        break;
      }
      default:
        assertNever(money);
    }
  });
  await voidRefusedChains(tx, ledger, voids);
  const finished = await redeemInvoices(
    tx,
    batch.flatMap((item, index) => {
      const ending = endings[index] ?? null;
      if (ending === null) return [];
      const { invoice, payer, confirmIdempotencyKey, attemptId, fees } = item;
      return [
        {
          invoice,
          payer,
          confirmIdempotencyKey,
          attemptId,
          fees,
          status: ending.status,
          failureReason: ending.status === 'FAILED' ? ending.reason : null,
          transferIds: ending.transferIds,
          transitions: [claimEvent(item), ...transitionsOf(ending)],
          history: ending.status === 'SETTLED' ? historyOf(item) : [],
        },
      ];
    }),
  );
  return batch.map((item, index) => {
    const intent = finished.get(item.invoice.id);
    const ending = endings[index] ?? null;
    if (intent === undefined || ending === null) return { kind: 'lost' };
    return { kind: 'done', intent, transitions: [claimEvent(item), ...transitionsOf(ending)] };
  });
}

/** transferIds: what the ledger holds for the invoice; a FAILED ending with some was reserved, then voided. */
type Ending =
  | { readonly status: 'SETTLED'; readonly transferIds: readonly string[] }
  | { readonly status: 'FAILED'; readonly reason: string; readonly transferIds: readonly string[] };

/**
 * Locks every invoice of the batch that is still claimable, then runs intent_guard for each
 * claimed one under that lock: the payer's lock first, so a confirm that loses the invoice never
 * reports the payer's lock as its refusal, and the limits' usage read after both locks are held.
 * Answers, per claimed invoice, null or the guard's refusal. The invoices are locked in id order,
 * so two batches never wait for each other in a circle; the recipients' limit locks are waited
 * for before any row is locked (the order intent_open_batch takes them in too).
 */
async function claimBatch(tx: Tx, batch: readonly ConfirmCommit[]): Promise<Map<string, { refusal: GuardRefusal | null }>> {
  const recipients = [
    ...new Set(batch.flatMap((item) => item.guard.checks.filter((check) => check.side === 'to').map((check) => check.userId))),
  ];
  if (recipients.length > 0) {
    tx.send(
      `SELECT pg_advisory_xact_lock($1, hashtext(current_schema() || ':' || recipient::text))
         FROM (SELECT DISTINCT recipient FROM unnest($2::bigint[]) AS recipient ORDER BY 1) AS recipients`,
      [RECIPIENT_LIMIT_LOCK_CLASS, recipients],
    );
  }
  const items = batch.map((item) => ({
    invoice_id: item.invoice.id,
    expected_version: item.expectedVersion,
    payer_user_id: item.payer.userId,
    checks: item.guard.checks.map(checkJson),
  }));
  const { rows } = await tx.query<{ id: string; refusal: GuardRefusal | null }>(
    `WITH claimed AS (
       SELECT i.id, x.payer_user_id, x.checks
         FROM intents i
         JOIN jsonb_to_recordset($2::jsonb) AS x (invoice_id uuid, expected_version integer, payer_user_id bigint, checks jsonb)
           ON i.id = x.invoice_id
        WHERE i.status = 'CREATED' AND i.operation_type = 'INVOICE_PAYMENT' AND i.expires_at > now()
          AND (x.expected_version IS NULL OR i.version = x.expected_version)
        ORDER BY i.id
          FOR UPDATE OF i
     )
     SELECT id, intent_guard($1, payer_user_id, id, checks) AS refusal FROM claimed`,
    [PAYER_LOCK_CLASS, JSON.stringify(items)],
  );
  return new Map(rows.map((row) => [row.id, { refusal: row.refusal }]));
}

function transitionsOf(ending: Ending): Transition[] {
  if (ending.status === 'SETTLED')
    return [
      { from: 'VALIDATED', to: 'AUTHORIZED' },
      { from: 'AUTHORIZED', to: 'SETTLED' },
    ];
  if (ending.transferIds.length > 0)
    return [
      { from: 'VALIDATED', to: 'AUTHORIZED' },
      { from: 'AUTHORIZED', to: 'FAILED', reason: ending.reason },
    ];
  return [{ from: 'VALIDATED', to: 'FAILED', reason: ending.reason }];
}

const claimEvent = (item: ConfirmCommit): Transition => ({
  from: 'CREATED',
  to: 'VALIDATED',
  payload: { payerAccount: item.payer.accountName, payerUserId: item.payer.userId, actor: item.actor },
});

function historyOf(item: ConfirmCommit): HistoryRow[] {
  const { invoice, payer, fees } = item;
  return [
    { accountName: payer.accountName, userId: payer.userId, direction: 'DEBIT', amount: invoice.amount, feeAmount: fees.preFee },
    { accountName: invoice.toAccountName, userId: invoice.toUserId, direction: 'CREDIT', amount: invoice.amount, feeAmount: fees.postFee },
  ];
}
