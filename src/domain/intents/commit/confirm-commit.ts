import type { Sql, Tx } from '../../../adapters/database.js';
import type { Ledger, TransferInput } from '../../../ledger/ledger.js';
import { apiError, assertNever } from '../../errors.js';
import { ledgerResultsPerIntent, moneyOutcomeOf, voidRefusedChains } from '../money/apply-transfers.js';
import { voidTransfer } from '../money/money-path.js';
import { PAYER_LOCK_CLASS, RECIPIENT_LIMIT_LOCK_CLASS, transactionInProgress } from '../create/payer-locks.js';
import { INTENT_SELECT, type HistoryRow, type Intent, toIntent, type Transition } from '../store/intent-store.js';
import { assertTrail } from '../store/state-machine.js';
import { checkJson, type Guard, type GuardRefusal, limitCheckOf } from './guard.js';

/**
 * Invoice confirms by group commit (docs/PERFORMANCE.md, Invoice confirm): the confirms that
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
  readonly fees: {
    readonly preFee: bigint;
    readonly postFee: bigint;
    readonly splits: ReadonlyArray<{ readonly account: string; readonly amount: string }>;
  };
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
  const finished = await finishBatch(
    tx,
    batch.flatMap((item, index) => {
      const ending = endings[index] ?? null;
      return ending === null ? [] : [{ item, ending, transitions: [claimEvent(item), ...transitionsOf(ending)] }];
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

/**
 * Where every claimed invoice ended, in one statement: the invoice row (its payer, fees,
 * transfers and version, as the claim and the ending of a single confirm would have written
 * them), its audit events in order, and the history rows of the settled ones. Answers the
 * invoices as stored, by id.
 */
async function finishBatch(
  tx: Sql,
  finishing: ReadonlyArray<{ item: ConfirmCommit; ending: Ending; transitions: readonly Transition[] }>,
): Promise<Map<string, Intent>> {
  if (finishing.length === 0) return new Map();
  for (const { ending, transitions } of finishing) assertTrail('CREATED', ending.status, transitions);
  const items = finishing.map(({ item, ending, transitions }, ord) => ({
    ord,
    invoice_id: item.invoice.id,
    final_status: ending.status,
    final_reason: ending.status === 'FAILED' ? ending.reason : null,
    payer_account: item.payer.accountName,
    payer_user_id: item.payer.userId,
    confirm_key: item.confirmIdempotencyKey,
    attempt_id: item.attemptId,
    pre_fee: item.fees.preFee.toString(),
    post_fee: item.fees.postFee.toString(),
    splits: item.fees.splits.map((split) => ({ account: split.account, amount: split.amount })),
    transfers: ending.transferIds,
    reserved: ending.transferIds.length > 0,
    operation_type: item.invoice.operationType,
    currency: item.invoice.currency,
    transitions: transitions.map((t) => ({ from: t.from, to: t.to, reason: t.reason ?? null, payload: t.payload ?? null })),
    history: ending.status === 'SETTLED' ? historyOf(item).map(historyJson) : [],
  }));
  const { rows } = await tx.query(
    `WITH x AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x (ord integer, invoice_id uuid, final_status text, final_reason text, payer_account text, payer_user_id bigint,
               confirm_key uuid, attempt_id uuid, pre_fee bigint, post_fee bigint, splits jsonb, transfers jsonb, reserved boolean,
               operation_type text, currency text, transitions jsonb, history jsonb)
     ), finished AS (
       UPDATE intents i
          SET status = x.final_status, updated_at = now(),
              failure_reason = coalesce(x.final_reason, i.failure_reason),
              from_account_name = x.payer_account, from_user_id = x.payer_user_id, user_id = x.payer_user_id,
              redeemed_by_user_id = x.payer_user_id, redeemed_at = now(), confirm_idempotency_key = x.confirm_key,
              confirm_attempt_id = x.attempt_id,
              version = i.version + 1,
              pre_fee_amount = x.pre_fee, post_fee_amount = x.post_fee, fee_splits = x.splits,
              transfer_ids = ARRAY(SELECT jsonb_array_elements_text(x.transfers)::uuid),
              reserved_at = CASE WHEN x.reserved THEN now() ELSE i.reserved_at END
         FROM x
        WHERE i.id = x.invoice_id AND i.status = 'CREATED'
       RETURNING i.*
     ), events AS (
       INSERT INTO intent_events (intent_id, status_from, status_to, reason, payload)
       SELECT x.invoice_id, t.value->>'from', t.value->>'to', t.value->>'reason', NULLIF(t.value->'payload', 'null'::jsonb)
         FROM x, jsonb_array_elements(x.transitions) WITH ORDINALITY AS t (value, ord)
        ORDER BY x.ord, t.ord
     ), history AS (
       INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
       SELECT x.invoice_id, h.account_name, h.user_id, x.operation_type, h.direction, h.amount, h.fee_amount, x.currency
         FROM x, jsonb_to_recordset(x.history) AS h (account_name text, user_id bigint, direction text, amount bigint, fee_amount bigint)
       ON CONFLICT (intent_id, account_name, direction) WHERE refund_id IS NULL DO NOTHING
     )
     SELECT ${INTENT_SELECT} FROM finished`,
    [JSON.stringify(items)],
  );
  const finished = new Map(rows.map((row) => [row.id as string, toIntent(row)]));
  // The claim holds each row locked in CREATED; a row not written here is a broken invariant.
  if (finished.size !== finishing.length) throw new Error(`finished ${finished.size} of ${finishing.length} claimed invoices`);
  return finished;
}

const historyJson = (h: HistoryRow) => ({
  account_name: h.accountName,
  user_id: h.userId,
  direction: h.direction,
  amount: h.amount.toString(),
  fee_amount: h.feeAmount.toString(),
});
