import type { Database, Sql, Tx } from '../../../adapters/database.js';
import { withIntentIds } from '../../../adapters/tracing.js';
import type { CreateTransferResult, Ledger, TransferInput } from '../../../ledger/ledger.js';
import { fundsCheckEvents } from '../../../ledger/sql-ledger.js';
import { type ApiError, apiError, assertNever } from '../../errors.js';
import { ledgerResultsPerIntent, moneyOutcomeOf, voidRefusedChains } from '../money/apply-transfers.js';
import { checkJson, type Guard, type GuardRefusal, recipientLimitKeysOf, refusalError } from './guard.js';
import { committing } from './commit-unanswered.js';
import { type ConfirmCommit, type ConfirmOutcome, commitConfirmBatch } from './confirm-commit.js';
import { GroupCommit } from './group-commit.js';
import { type BatchEvidence, BetLost, type LedgerCall, LedgerCallChoice } from './ledger-call.js';
import { type HistoryRow, type NewIntent, newIntentRow, type Transition } from '../store/intent-store.js';
import { voidTransfer } from '../money/money-path.js';
import { closeNewIntents, type NewIntentClosing } from '../store/intent-batch-writer.js';
import { PAYER_LOCK_CLASS, RECIPIENT_LIMIT_LOCK_CLASS } from './payer-locks.js';

/**
 * The one transaction that stores new intents with their money, shared by every intent that
 * arrives while earlier ones commit (docs/design.md#hot-group-commit). Per batch, whatever its
 * size: BEGIN, one statement that guards and inserts the intents (intent_open_batch), one ledger
 * call with all their transfers (a TigerBeetle-style batch: each intent's settlement is its own
 * linked chain, so one refusal leaves the others alone; on PostgreSQL sent right behind the
 * opening statement, see LedgerCall), one statement with every audit event and history row,
 * COMMIT.
 */

export interface IntentCommit {
  /** transferIds already set. */
  readonly intent: NewIntent;
  readonly guard: Guard;
  /** `[]`, `[reserve]` or `[reserve, ...settlement chain]`. */
  readonly transfers: readonly TransferInput[];
  /** The audit trail when every transfer applies. */
  readonly transitions: readonly Transition[];
  readonly history: readonly HistoryRow[];
}

export type CommitOutcome =
  | { readonly kind: 'duplicate' }
  /** Nothing was stored: the guard or the reservation refused. */
  | { readonly kind: 'refused'; readonly error: ApiError }
  | {
      readonly kind: 'stored';
      readonly createdAt: Date;
      readonly transitions: readonly Transition[];
      /** The settlement chain did not apply; the reservation was voided and the intent stored as FAILED. */
      readonly failure: { readonly reason: string } | null;
    };

/**
 * Intents of one batch. The ledger's and the guard's cost is mostly per batch (locks, the plan,
 * the roll-up of hot accounts), so a larger batch costs less per intent; 64 did better than 32
 * and 128 (docs/design.md#hot-group-commit).
 */
const BATCH_MAX = 64;
/**
 * Batches being committed at once, per instance: one. On two cores a second batch in flight only
 * split the work into smaller batches that cost more CPU per intent and contended for the hot
 * accounts' shards (docs/design.md#hot-group-commit). Intents arriving meanwhile wait in
 * the process and join the next batch; more throughput comes from more instances.
 */
const FLUSHES_MAX = 1;
const PGLITE_GATHER_MS = 3;

export class IntentCommitter {
  private readonly group: GroupCommit<IntentCommit, CommitOutcome>;
  private readonly confirms: GroupCommit<ConfirmCommit, ConfirmOutcome>;

  constructor(
    db: Database,
    ledger: Ledger,
    observeBatch: (size: number) => void = () => {},
    observeBet: (call: LedgerCall, outcome: BetOutcome) => void = () => {},
  ) {
    // The ledger call leaves with intent_open_batch: on PostgreSQL in the same round trip. On
    // PGlite the closing statement leaves with them as well: its one connection is held by the
    // transaction, so while the answers crossed to this thread and the closing statement crossed
    // back, the database thread sat idle and every read waited (docs/design.md#hot-ledger-bet). That bet is lost by every batch that holds a refused
    // transfer, an everyday answer, so it is held back after a loss (LedgerCallChoice).
    const choice = new LedgerCallChoice(db.kind === 'pglite' ? 'with-close' : 'with-open');
    const commitAs = (batch: readonly IntentCommit[], call: LedgerCall) =>
      withIntentIds(
        batch.map((item) => item.intent.id),
        () => committing(db, (tx) => commitBatch(tx, ledger, batch, call)),
      );
    this.group = new GroupCommit(betting(commitAs, choice, observeBatch, observeBet), {
      batchMax: BATCH_MAX,
      flushesMax: FLUSHES_MAX,
      // A payment refused by the ledger still counted in the recipient limits of the intents
      // opened after it in its batch: intents checked against one recipient's limits go apart.
      keysOf: (item) => recipientLimitKeysOf(item.guard),
      // Users' wallets are guarded accounts, one balance row each, locked by the ledger call until
      // COMMIT: a batch that needs a wallet another batch holds waits here rather than in the
      // database, holding its own locks and connection (docs/design.md#hot-payer-locks).
      // With one batch in flight no other batch holds one, so the keys are not computed at all.
      ...(FLUSHES_MAX > 1 ? { lockKeysOf: (item: IntentCommit) => walletKeysOf(item.intent) } : {}),
      // PGlite runs one statement at a time, so while a batch commits the requests behind it wait
      // to read, and reach the commit one by one: a short pause lets them gather into the next
      // batch (docs/design.md#hot-pglite-gather).
      gatherMs: db.kind === 'pglite' ? PGLITE_GATHER_MS : 0,
    });
    // Invoice confirms batch apart from new intents: they claim rows that exist instead of
    // inserting, and a batch of each can commit at once. The same keys and the same pause hold.
    // Their ledger call waits for the claim's answer: sent with the claim it measured no faster
    // (docs/perf-log/2026-11.md, "the confirm's ledger call").
    const confirmAs = async (batch: readonly ConfirmCommit[]) => {
      const outcomes = await committing(db, (tx) => commitConfirmBatch(tx, ledger, batch));
      observeBatch(batch.length);
      return outcomes;
    };
    this.confirms = new GroupCommit(confirmAs, {
      batchMax: BATCH_MAX,
      flushesMax: FLUSHES_MAX,
      keysOf: (item) => recipientLimitKeysOf(item.guard),
      gatherMs: db.kind === 'pglite' ? PGLITE_GATHER_MS : 0,
    });
  }

  commit(item: IntentCommit): Promise<CommitOutcome> {
    return this.group.submit(item);
  }

  /** An invoice confirm (confirm-commit.ts), committed with the confirms that arrive meanwhile. */
  confirm(item: ConfirmCommit): Promise<ConfirmOutcome> {
    return this.confirms.submit(item);
  }
}

/** How a batch's bet on its ledger call ended; lost: rolled back and run again 'after-open'; none: sent 'after-open', no bet. */
export type BetOutcome = 'won' | 'lost' | 'none';

/** A batch's flush: committed on the ledger call's bet, and again 'after-open' when the bet is lost. */
function betting(
  commitAs: (batch: readonly IntentCommit[], call: LedgerCall) => Promise<BatchCommitted>,
  choice: LedgerCallChoice,
  observeBatch: (size: number) => void,
  observeBet: (call: LedgerCall, outcome: BetOutcome) => void,
) {
  return async (batch: readonly IntentCommit[]) => {
    const call = choice.next();
    let outcome: BetOutcome = call === 'after-open' ? 'none' : 'won';
    const committed = await commitAs(batch, call).catch((error: unknown) => {
      if (!(error instanceof BetLost)) throw error;
      outcome = 'lost';
      return commitAs(batch, 'after-open');
    });
    choice.record(committed.evidence);
    observeBet(call, outcome);
    observeBatch(batch.length);
    return committed.outcomes;
  };
}

function walletKeysOf(intent: NewIntent): string[] {
  const keys: string[] = [];
  if (intent.fromUserId !== null) keys.push(`user:${intent.fromUserId}`);
  if (intent.toUserId !== null) keys.push(`user:${intent.toUserId}`);
  return keys;
}

/** funds: the ledger would refuse the payment's reservation whatever the batch does (sql/ledger/14-funds.sql). */
type Opened = { createdAt: string } | { duplicate: true } | GuardRefusal | { refusal: 'funds' };

/** A batch's outcomes, and what it showed of the bets on its ledger call (LedgerCallChoice). */
export interface BatchCommitted {
  readonly outcomes: CommitOutcome[];
  readonly evidence: BatchEvidence;
}

/**
 * Throws to roll the whole batch back: BetLost, and IntentCommitter runs it again 'after-open';
 * anything else, and GroupCommit commits its intents one by one.
 */
export async function commitBatch(
  tx: Tx,
  ledger: Ledger,
  batch: readonly IntentCommit[],
  ledgerCall: LedgerCall = 'after-open',
): Promise<BatchCommitted> {
  const withTransfers = (indexes: readonly number[]) => indexes.filter((index) => batch[index]!.transfers.length > 0);
  const moveMoney = (indexes: readonly number[]) =>
    ledgerResultsPerIntent(
      tx,
      ledger,
      indexes.map((index) => batch[index]!.transfers),
    );
  const opening = openBatch(tx, batch);
  let early: { readonly moving: number[]; readonly results: ReturnType<typeof moveMoney> } | null = null;
  if (ledgerCall !== 'after-open') {
    const moving = withTransfers(batch.map((_, index) => index));
    early = { moving, results: moveMoney(moving) };
    // Handled here, so that a failure while the opening is awaited is not unhandled; it is
    // thrown where the results are awaited, below.
    early.results.catch(() => {});
  }
  if (ledgerCall === 'with-close') {
    // Sent before any answer, as if every intent opened and every transfer applied; the checks
    // below throw BetLost otherwise, before COMMIT is sent, and the closing rolls back with the rest.
    closeNewIntents(
      tx,
      batch.map((item) => ({ intent: item.intent, action: 'keep', transitions: item.transitions, history: item.history })),
    );
  }
  const opened = await opening;
  const outcomes: Array<CommitOutcome | null> = opened.map((o, i) => {
    if ('duplicate' in o) return { kind: 'duplicate' };
    if ('refusal' in o) return { kind: 'refused', error: o.refusal === 'funds' ? insufficientFunds() : refusalError(o, batch[i]!.guard) };
    return null;
  });
  const everyOpened = outcomes.every((outcome) => outcome === null);
  if (early !== null && !everyOpened) {
    await early.results.catch(() => {});
    throw new BetLost();
  }

  const moving = early?.moving ?? withTransfers(outcomes.flatMap((outcome, index) => (outcome === null ? [index] : [])));
  const resultsOf = await (early?.results ?? moveMoney(moving));
  if (ledgerCall === 'with-close' && [...resultsOf.values()].some((results) => moneyOutcomeOf(results).kind !== 'applied'))
    throw new BetLost();
  const voids: TransferInput[] = [];
  const closing: NewIntentClosing[] = [];
  batch.forEach((item, index) => {
    if (outcomes[index] !== null) return;
    const money = moneyOutcomeOf(resultsOf.get(moving.indexOf(index)) ?? []);
    const createdAt = new Date((opened[index] as { createdAt: string }).createdAt);
    switch (money.kind) {
      case 'reservation_refused':
        // The settlement chain needs the reservation, so nothing moved: the intent is not stored.
        outcomes[index] = { kind: 'refused', error: reservationError(money.failure) };
        closing.push({ intent: item.intent, action: 'drop', transitions: [], history: [] });
        break;
      case 'settlement_refused': {
        const { reason } = money;
        const transitions: Transition[] = [...item.transitions.slice(0, -1), { from: 'AUTHORIZED', to: 'FAILED', reason }];
        voids.push(voidTransfer(item.intent.id, item.intent.operationType));
        outcomes[index] = { kind: 'stored', createdAt, transitions, failure: { reason } };
        closing.push({ intent: item.intent, action: 'fail', failureReason: reason, transitions, history: [] });
        break;
      }
      case 'applied':
        outcomes[index] = { kind: 'stored', createdAt, transitions: item.transitions, failure: null };
        closing.push({ intent: item.intent, action: 'keep', transitions: item.transitions, history: item.history });
        break;
      default:
        assertNever(money);
    }
  });
  await voidRefusedChains(tx, ledger, voids);
  if (ledgerCall !== 'with-close') closeNewIntents(tx, closing);
  const stored = outcomes.map((o) => o!);
  return {
    outcomes: stored,
    evidence: { everyOpened, everyApplied: stored.every((o) => o.kind === 'stored' && o.failure === null) },
  };
}

/**
 * intent_open_batch: every intent guarded, and inserted unless its key is stored or it is refused.
 * Each payment whose reservation the ledger would refuse whatever the batch does is refused for
 * funds here (docs/design.md#hot-funds-at-opening), so that it stays out of the ledger call.
 */
async function openBatch(tx: Sql, batch: readonly IntentCommit[]): Promise<Opened[]> {
  const funds = fundsCheckEvents(batch.map((item) => item.transfers));
  const items = batch.map(({ intent, guard }, index) => ({
    intent: newIntentRow(intent),
    payer: guard.payerUserId,
    checks: guard.checks.map(checkJson),
    ...(funds[index] ? { funds: funds[index] } : {}),
  }));
  const { rows } = await tx.query<{ opened: Opened[] }>('SELECT intent_open_batch($1, $2, $3::jsonb) AS opened', [
    PAYER_LOCK_CLASS,
    RECIPIENT_LIMIT_LOCK_CLASS,
    JSON.stringify(items),
  ]);
  const opened = rows[0]?.opened ?? [];
  if (opened.length !== batch.length) throw new Error(`intent_open_batch answered ${opened.length} of ${batch.length}`);
  return opened;
}

const insufficientFunds = () => apiError('INSUFFICIENT_FUNDS', 'the source account lacks funds for this payment');

function reservationError(failure: CreateTransferResult): ApiError {
  if (failure.result === 'exceeds_credits') return insufficientFunds();
  return apiError('LEDGER_TRANSFER_ERROR', `ledger refused the reservation: ${failure.result}`);
}
