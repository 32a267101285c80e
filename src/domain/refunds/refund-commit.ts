import { type Database, plannedEachCall, type Tx } from '../../adapters/database.js';
import type { CreateTransferResult, Ledger, TransferInput } from '../../ledger/ledger.js';
import { assertNever } from '../errors.js';
import type { Intent } from '../intents/store/intent-store.js';
import { committing } from '../intents/commit/commit-unanswered.js';
import { GroupCommit } from '../intents/commit/group-commit.js';
import { BetLost, type LedgerCall, LedgerCallChoice } from '../intents/commit/ledger-call.js';
import { ledgerResultsPerIntent, moneyOutcomeOf, SETTLEMENT_REFUSAL, voidRefusedChains } from '../intents/money/apply-transfers.js';
import { refundTransferIdsBySplit, refundTransfers, refundVoid } from './refund-money.js';
import type { Refund } from './refund-store.js';

/**
 * Refunds by group commit, apart from new intents and confirms as confirms are apart from new
 * intents: the refunds that arrive while a batch commits go together in the next one, so refunds
 * under load cost a transaction per batch, not per refund, and never queue behind payments. Per
 * batch: BEGIN, refund_open_batch (sql/refunds: the remainder check under each original's row
 * lock, and the refunds stored with their transfer ids), one ledger call with every opened
 * refund's transfers (each its own reservation and linked chain, so one refusal leaves the others
 * alone), the voids of refused chains and the FAILED marks when there are any, one statement with
 * the history rows and feed events, COMMIT. The check and the money commit together or not at all.
 *
 * Several refunds of one original may share a batch; refund_open_batch checks each against what
 * the earlier ones left. A refund the ledger refuses gives its amount back, which that check could
 * not know: a batch where a later refund of the same original follows a refused one is rolled back
 * (RemainderGivenBack), and GroupCommit commits its refunds one by one, each seeing what the one
 * before it ended as.
 *
 * The ledger call leaves right behind refund_open_batch, in the same round trip, on the bet that
 * every refund opens as the request predicts it (its amount given, its fee shares the floors or,
 * for a full refund, the whole splits): the intents' bet (LedgerCallChoice), made per batch. A
 * refund that opens otherwise (a replayed key, more than remains, all that remains, a share that
 * the floors of earlier refunds changed) loses it: the transaction is rolled back, its ledger call
 * with it, and the batch runs again with the call sent after the answer.
 */
export interface RefundCommit {
  readonly refundId: string;
  readonly serviceId: string;
  readonly idempotencyKey: string;
  readonly fingerprint: string;
  readonly original: Intent;
  /** null: all that remains refundable. */
  readonly amount: bigint | null;
  /** What the original credited its to-account: amount − post fee. */
  readonly refundable: bigint;
  readonly refundFees: boolean;
  readonly reason: string;
  readonly actor: number;
  readonly metadata: Readonly<Record<string, unknown>>;
}

export type RefundOutcome =
  | { readonly kind: 'duplicate' }
  /** Nothing stored: it would refund more than remains. */
  | { readonly kind: 'exceeds'; readonly remaining: bigint }
  /** SETTLED, or FAILED when the ledger refused its money (its failureReason says why). */
  | { readonly kind: 'stored'; readonly refund: Refund };

export const INSUFFICIENT_FUNDS_REASON = 'insufficient_funds';

/** A refused refund's amount came back to an original whose later refunds in the batch were checked without it. */
export class RemainderGivenBack extends Error {}

/** As intents' (intent-commit.ts): a larger batch costs less per refund; one batch in flight per instance. */
const BATCH_MAX = 64;
const FLUSHES_MAX = 1;
const PGLITE_GATHER_MS = 3;

export class RefundCommitter {
  private readonly group: GroupCommit<RefundCommit, RefundOutcome>;

  constructor(db: Database, ledger: Ledger, pendingTimeoutS: number, observeBatch: (size: number) => void = () => {}) {
    const choice = new LedgerCallChoice('with-open');
    const commitAs = (batch: readonly RefundCommit[], call: LedgerCall) =>
      committing(db, (tx) => commitRefundBatch(tx, ledger, batch, pendingTimeoutS, call));
    this.group = new GroupCommit(
      async (batch: readonly RefundCommit[]) => {
        const call = batch.every((item) => predictedOpening(item) !== null) ? choice.next() : 'after-open';
        const committed = await commitAs(batch, call).catch((error: unknown) => {
          if (!(error instanceof BetLost)) throw error;
          return commitAs(batch, 'after-open');
        });
        // A batch that could not bet tells nothing of whether the next one would win.
        if (committed.asPredicted !== null) choice.record({ everyOpened: committed.asPredicted, everyApplied: committed.asPredicted });
        observeBatch(batch.length);
        return committed.outcomes;
      },
      {
        batchMax: BATCH_MAX,
        flushesMax: FLUSHES_MAX,
        // Refunds of one original share a batch: refund_open_batch checks them in batch order.
        gatherMs: db.kind === 'pglite' ? PGLITE_GATHER_MS : 0,
      },
    );
  }

  commit(item: RefundCommit): Promise<RefundOutcome> {
    return this.group.submit(item);
  }
}

type Opened = { duplicate: true } | { exceeds: string } | { amount: string; shares: string[]; createdAt: string };

interface Opening {
  readonly amount: bigint;
  readonly shares: readonly bigint[];
}

/**
 * How a refund opens if nothing else refunded its original meanwhile in a way that changes it:
 * its amount as asked, each fee share the floor of its proportion, or the whole split for a refund
 * of everything at once (refund_open_batch's rule). null: it cannot be told before the database
 * answers (all that remains).
 */
export function predictedOpening(item: RefundCommit): Opening | null {
  const { amount, refundable } = item;
  if (amount === null) return null;
  const splits = item.original.feeSplits.map((split) => BigInt(split.amount));
  if (!item.refundFees) return { amount, shares: splits.map(() => 0n) };
  return { amount, shares: splits.map((split) => (amount === refundable ? split : (split * amount) / refundable)) };
}

const sameOpening = (opened: Opened, predicted: Opening): boolean =>
  'amount' in opened &&
  BigInt(opened.amount) === predicted.amount &&
  opened.shares.length === predicted.shares.length &&
  opened.shares.every((share, index) => BigInt(share) === predicted.shares[index]);

export interface RefundBatchCommitted {
  readonly outcomes: RefundOutcome[];
  /** Whether every refund opened as predicted (the bet stood or would have); null: some could not be predicted. */
  readonly asPredicted: boolean | null;
}

/**
 * Throws to roll the whole batch back: BetLost, and RefundCommitter runs it again 'after-open';
 * anything else, and GroupCommit commits its refunds one by one.
 */
export async function commitRefundBatch(
  tx: Tx,
  ledger: Ledger,
  batch: readonly RefundCommit[],
  pendingTimeoutS: number,
  ledgerCall: LedgerCall = 'after-open',
): Promise<RefundBatchCommitted> {
  const predicted = batch.map(predictedOpening);
  const opening = openBatch(tx, batch);
  const transfersOf = (index: number, { amount, shares }: Opening) =>
    refundTransfers(batch[index]!.refundId, batch[index]!.original, amount, shares, pendingTimeoutS);
  let early: Promise<Map<number, CreateTransferResult[]>> | null = null;
  if (ledgerCall !== 'after-open') {
    const transfers = predicted.map((p, index) => {
      if (p === null) throw new Error('a refund bet needs every opening predicted');
      return transfersOf(index, p);
    });
    early = ledgerResultsPerIntent(tx, ledger, transfers);
    // Handled here, so that a failure while the opening is awaited is not unhandled; it is
    // thrown where the results are awaited, below.
    early.catch(() => {});
  }
  const opened = await opening;
  const everyPredictable = predicted.every((p) => p !== null);
  const asPredicted = everyPredictable ? opened.every((o, index) => sameOpening(o, predicted[index]!)) : null;
  if (early !== null && asPredicted !== true) {
    await early.catch(() => {});
    throw new BetLost();
  }
  const moving: Array<{ index: number; amount: bigint; feeAmount: bigint; transfers: TransferInput[]; createdAt: Date }> = [];
  const outcomes: Array<RefundOutcome | null> = opened.map((o, index) => {
    if ('duplicate' in o) return { kind: 'duplicate' };
    if ('exceeds' in o) return { kind: 'exceeds', remaining: BigInt(o.exceeds) };
    const amount = BigInt(o.amount);
    const shares = o.shares.map((share) => BigInt(share));
    moving.push({
      index,
      amount,
      feeAmount: shares.reduce((sum, share) => sum + share, 0n),
      transfers: transfersOf(index, { amount, shares }),
      createdAt: new Date(o.createdAt),
    });
    return null;
  });
  // With the bet every refund opened, and moving lists them all in batch order, as the early call did.
  const resultsOf = await (early ??
    ledgerResultsPerIntent(
      tx,
      ledger,
      moving.map((m) => m.transfers),
    ));
  const voids: TransferInput[] = [];
  const failed: Array<{ id: string; failure_reason: string; transfer_ids: string[] }> = [];
  const closing: ClosingRow[] = [];
  moving.forEach((m, at) => {
    const item = batch[m.index]!;
    const money = moneyOutcomeOf(resultsOf.get(at) ?? []);
    /** Why the ledger refused its money (the refund's failureReason); null: it applied. */
    let refusal: string | null;
    let transferIds: string[];
    switch (money.kind) {
      case 'applied':
        refusal = null;
        transferIds = m.transfers.map((t) => t.id);
        break;
      case 'reservation_refused':
        refusal = money.failure.result === 'exceeds_credits' ? INSUFFICIENT_FUNDS_REASON : `${SETTLEMENT_REFUSAL}${money.failure.result}`;
        transferIds = [];
        break;
      case 'settlement_refused': {
        const voided = refundVoid(item.refundId, item.original.id);
        voids.push(voided);
        refusal = money.reason;
        transferIds = [m.transfers[0]!.id, voided.id];
        break;
      }
      default:
        assertNever(money);
    }
    if (refusal !== null) failed.push({ id: item.refundId, failure_reason: refusal, transfer_ids: transferIds });
    closing.push({ item, amount: m.amount, feeAmount: m.feeAmount, settled: refusal === null });
    const updatedAt = refusal === null ? m.createdAt : new Date();
    outcomes[m.index] = {
      kind: 'stored',
      refund: {
        id: item.refundId,
        serviceId: item.serviceId,
        idempotencyKey: item.idempotencyKey,
        requestFingerprint: item.fingerprint,
        intentId: item.original.id,
        amount: m.amount,
        feeAmount: m.feeAmount,
        currency: item.original.currency,
        status: refusal === null ? 'SETTLED' : 'FAILED',
        reason: item.reason,
        failureReason: refusal,
        requestedByUserId: item.actor,
        metadata: item.metadata,
        transferIds,
        createdAt: m.createdAt,
        updatedAt,
      },
    };
  });
  throwIfRemainderGivenBack(batch, opened, failed);
  await voidRefusedChains(tx, ledger, voids);
  if (failed.length > 0) tx.send('SELECT refund_fail_batch($1::jsonb)', [JSON.stringify(failed)]);
  closeBatch(tx, closing);
  return { outcomes: outcomes.map((o) => o!), asPredicted };
}

function throwIfRemainderGivenBack(batch: readonly RefundCommit[], opened: readonly Opened[], failed: ReadonlyArray<{ id: string }>): void {
  if (failed.length === 0) return;
  const refused = new Set(failed.map((f) => f.id));
  const refusedOriginals = new Set<string>();
  batch.forEach((item, index) => {
    if (refusedOriginals.has(item.original.id) && !('duplicate' in opened[index]!))
      throw new RemainderGivenBack(`refund ${item.refundId} was checked without the amount a refused refund gave back`);
    if (refused.has(item.refundId)) refusedOriginals.add(item.original.id);
  });
}

async function openBatch(tx: Tx, batch: readonly RefundCommit[]): Promise<Opened[]> {
  const items = batch.map((item) => ({
    id: item.refundId,
    service_id: item.serviceId,
    idempotency_key: item.idempotencyKey,
    fingerprint: item.fingerprint,
    intent_id: item.original.id,
    amount: item.amount?.toString() ?? null,
    refundable: item.refundable.toString(),
    splits: item.original.feeSplits.map((split) => split.amount),
    refund_fees: item.refundFees,
    currency: item.original.currency,
    reason: item.reason,
    user_id: item.actor,
    metadata: item.metadata,
    transfer_ids: refundTransferIdsBySplit(item.refundId, item.original.feeSplits.length),
  }));
  const { rows } = await tx.query<{ opened: Opened[] }>('SELECT refund_open_batch($1::jsonb) AS opened', [JSON.stringify(items)]);
  const opened = rows[0]?.opened ?? [];
  if (opened.length !== batch.length) throw new Error(`refund_open_batch answered ${opened.length} of ${batch.length}`);
  return opened;
}

interface ClosingRow {
  readonly item: RefundCommit;
  readonly amount: bigint;
  readonly feeAmount: bigint;
  readonly settled: boolean;
}

/**
 * Every stored refund's event in the feed (docs/rules.md R57: `type: refund`,
 * read by GET /events, the webhooks and the bus), and the history rows of the settled ones (the
 * original's intent id and operation type, the refund's id): the to-account debited, the
 * from-account credited with the fees returned. Sent, not awaited: the COMMIT follows it.
 */
function closeBatch(tx: Tx, closing: readonly ClosingRow[]): void {
  if (closing.length === 0) return;
  const items = closing.map(({ item, amount, feeAmount, settled }) => ({
    id: item.refundId,
    service_id: item.serviceId,
    status: settled ? 'SETTLED' : 'FAILED',
    amount: amount.toString(),
    intent_id: item.original.id,
    operation_type: item.original.operationType,
    currency: item.original.currency,
    history: settled
      ? [
          {
            account_name: item.original.toAccountName,
            user_id: item.original.toUserId,
            direction: 'DEBIT',
            amount: amount.toString(),
            fee_amount: '0',
          },
          {
            account_name: item.original.fromAccountName,
            user_id: item.original.fromUserId,
            direction: 'CREDIT',
            amount: amount.toString(),
            fee_amount: feeAmount.toString(),
          },
        ]
      : [],
  }));
  tx.send(
    plannedEachCall(`WITH items AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x (id uuid, service_id text, status text, amount bigint, intent_id uuid, operation_type text, currency text,
               history jsonb)
     ), feed AS (
       INSERT INTO event_feed (xact, seq, event_id, intent_id, refund_id, service_id, operation_type, status_from, status_to, amount,
                               currency, occurred_at)
       SELECT me.xact, n.seq, n.seq, n.intent_id, n.id, n.service_id, n.operation_type, NULL, n.status, n.amount, n.currency, now()
         FROM (SELECT x.*, nextval(pg_get_serial_sequence('intent_events', 'id')) AS seq FROM items x) n
        CROSS JOIN (SELECT pg_current_xact_id()::text::bigint AS xact) me
     )
     INSERT INTO transactions (intent_id, refund_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
     SELECT x.intent_id, x.id, h.account_name, h.user_id, x.operation_type, h.direction, h.amount, h.fee_amount, x.currency
       FROM items x, jsonb_to_recordset(x.history) AS h (account_name text, user_id bigint, direction text, amount bigint, fee_amount bigint)`),
    [JSON.stringify(items)],
  );
}
