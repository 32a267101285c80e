import { type Database, plannedEachCall, type Tx } from '../../adapters/database.js';
import type { Ledger, TransferInput } from '../../ledger/ledger.js';
import { assertNever } from '../errors.js';
import type { Intent } from '../intents/store/intent-store.js';
import { committing } from '../intents/commit/commit-unanswered.js';
import { GroupCommit } from '../intents/commit/group-commit.js';
import { ledgerResultsPerIntent, moneyOutcomeOf, SETTLEMENT_REFUSAL, voidRefusedChains } from '../intents/money/apply-transfers.js';
import { refundTransfers, refundVoid } from './refund-money.js';
import type { Refund } from './refund-store.js';

/**
 * Refunds by group commit, apart from new intents and confirms as confirms are apart from new
 * intents: the refunds that arrive while a batch commits go together in the next one, so refunds
 * under load cost a transaction per batch, not per refund, and never queue behind payments. Per
 * batch: BEGIN, refund_open_batch (sql/refunds: the remainder check under each original's row
 * lock, and the refunds stored), one ledger call with every opened refund's transfers (each its own
 * reservation and linked chain, so one refusal leaves the others alone), the voids of refused
 * chains and the FAILED marks when there are any, one statement with the transfer ids, history
 * rows and feed events, COMMIT. The check and the money commit together or not at all.
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

/** As intents' (intent-commit.ts): a larger batch costs less per refund; one batch in flight per instance. */
const BATCH_MAX = 64;
const FLUSHES_MAX = 1;
const PGLITE_GATHER_MS = 3;

export class RefundCommitter {
  private readonly group: GroupCommit<RefundCommit, RefundOutcome>;

  constructor(db: Database, ledger: Ledger, pendingTimeoutS: number, observeBatch: (size: number) => void = () => {}) {
    this.group = new GroupCommit(
      async (batch: readonly RefundCommit[]) => {
        const outcomes = await committing(db, (tx) => commitRefundBatch(tx, ledger, batch, pendingTimeoutS));
        observeBatch(batch.length);
        return outcomes;
      },
      {
        batchMax: BATCH_MAX,
        flushesMax: FLUSHES_MAX,
        // Two refunds of one original go in separate batches, so the second is checked against
        // what the first ended as (a refund the ledger refuses gives its amount back).
        keysOf: (item) => [item.original.id],
        gatherMs: db.kind === 'pglite' ? PGLITE_GATHER_MS : 0,
      },
    );
  }

  commit(item: RefundCommit): Promise<RefundOutcome> {
    return this.group.submit(item);
  }
}

type Opened = { duplicate: true } | { exceeds: string } | { amount: string; shares: string[]; createdAt: string };

export async function commitRefundBatch(
  tx: Tx,
  ledger: Ledger,
  batch: readonly RefundCommit[],
  pendingTimeoutS: number,
): Promise<RefundOutcome[]> {
  const opened = await openBatch(tx, batch);
  const moving: Array<{ index: number; amount: bigint; feeAmount: bigint; transfers: TransferInput[]; createdAt: Date }> = [];
  const outcomes: Array<RefundOutcome | null> = opened.map((o, index) => {
    if ('duplicate' in o) return { kind: 'duplicate' };
    if ('exceeds' in o) return { kind: 'exceeds', remaining: BigInt(o.exceeds) };
    const item = batch[index]!;
    const amount = BigInt(o.amount);
    const shares = o.shares.map((share) => BigInt(share));
    moving.push({
      index,
      amount,
      feeAmount: shares.reduce((sum, share) => sum + share, 0n),
      transfers: refundTransfers(item.refundId, item.original, amount, shares, pendingTimeoutS),
      createdAt: new Date(o.createdAt),
    });
    return null;
  });
  const resultsOf = await ledgerResultsPerIntent(
    tx,
    ledger,
    moving.map((m) => m.transfers),
  );
  const voids: TransferInput[] = [];
  const failed: Array<{ id: string; failure_reason: string }> = [];
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
    if (refusal !== null) failed.push({ id: item.refundId, failure_reason: refusal });
    closing.push({ item, amount: m.amount, feeAmount: m.feeAmount, transferIds, settled: refusal === null });
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
  await voidRefusedChains(tx, ledger, voids);
  if (failed.length > 0) tx.send('SELECT refund_fail_batch($1::jsonb)', [JSON.stringify(failed)]);
  closeBatch(tx, closing);
  return outcomes.map((o) => o!);
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
  readonly transferIds: readonly string[];
  readonly settled: boolean;
}

/**
 * Every stored refund's transfer ids and its event in the feed (docs/rules.md R57: `type: refund`,
 * read by GET /events, the webhooks and the bus), and the history rows of the settled ones (the
 * original's intent id and operation type, the refund's id): the to-account debited, the
 * from-account credited with the fees returned. Sent, not awaited: the COMMIT follows it. The
 * refunds are updated by key (the ids as an array): planned with `items` as a join alone, the 100
 * rows PostgreSQL assumes of jsonb_to_recordset read the whole refunds table up to tens of
 * thousands of rows (docs/design.md#hot-stable-plans).
 */
function closeBatch(tx: Tx, closing: readonly ClosingRow[]): void {
  if (closing.length === 0) return;
  const items = closing.map(({ item, amount, feeAmount, transferIds, settled }) => ({
    id: item.refundId,
    service_id: item.serviceId,
    status: settled ? 'SETTLED' : 'FAILED',
    amount: amount.toString(),
    intent_id: item.original.id,
    operation_type: item.original.operationType,
    currency: item.original.currency,
    transfers: transferIds,
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
               transfers jsonb, history jsonb)
     ), linked AS (
       UPDATE refunds r SET transfer_ids = ARRAY(SELECT jsonb_array_elements_text(x.transfers)::uuid)
         FROM items x WHERE r.id = x.id AND r.id = ANY (ARRAY(SELECT id FROM items))
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
