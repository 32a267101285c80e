import { plannedEachCall, type Sql, type Tx } from '../../../adapters/database.js';
import { type HistoryRow, INTENT_SELECT, type Intent, type NewIntent, toIntent, type Transition } from './intent-store.js';
import { assertTrail } from './state-machine.js';

/**
 * The group commits' writes of intent state, beside the one writer of single moves
 * (intent-writer.ts): each a set-based statement for a whole batch, whose trails are checked
 * against the same transition table before anything is sent. New intents are inserted with their
 * status by intent_open_batch (sql/); here they are closed (their trail and history, a FAILED
 * mark for a refused settlement, a drop for a refused reservation), and invoices are redeemed.
 */

/** How a new intent of a batch ends its transaction. */
export interface NewIntentClosing {
  readonly intent: Pick<NewIntent, 'id' | 'operationType' | 'currency' | 'status'>;
  /** keep: append its trail; fail: mark it FAILED with its trail; drop: it never happened. */
  readonly action: 'keep' | 'fail' | 'drop';
  readonly failureReason?: string;
  readonly transitions: readonly Transition[];
  readonly history: readonly HistoryRow[];
}

/**
 * Every intent's audit events (in order) and history rows in one statement, which reads no table:
 * joined with `intents`, a batch estimated at jsonb_to_recordset's default 100 rows made the
 * planner hash-join a sequential scan of the table while it was small, and a fresh installation
 * slowed down as it grew (docs/perf-log/2026-11.md, "Stale plans"). The rare FAILED marks and drops go by primary key.
 * Nothing here is read back, so the statements are sent, not awaited: the COMMIT follows them in
 * the same round trip, and fails with them.
 */
export function closeNewIntents(tx: Tx, closing: readonly NewIntentClosing[]): void {
  if (closing.length === 0) return;
  for (const { intent, action, transitions } of closing) {
    if (action !== 'drop') assertTrail(null, action === 'fail' ? 'FAILED' : intent.status, transitions);
  }
  const items = closing.map(({ intent, transitions, history }, ord) => ({
    ord,
    id: intent.id,
    operation_type: intent.operationType,
    currency: intent.currency,
    transitions: transitions.map(transitionJson),
    history: history.map(historyJson),
  }));
  tx.send(
    `WITH items AS (
       SELECT * FROM jsonb_to_recordset($1::jsonb)
         AS x (ord integer, id uuid, operation_type text, currency text, transitions jsonb, history jsonb)
     ), events AS (
       INSERT INTO intent_events (intent_id, status_from, status_to, reason, payload)
       SELECT x.id, t.value->>'from', t.value->>'to', t.value->>'reason', NULLIF(t.value->'payload', 'null'::jsonb)
         FROM items x, jsonb_array_elements(x.transitions) WITH ORDINALITY AS t (value, ord)
        ORDER BY x.ord, t.ord
     )
     INSERT INTO transactions (intent_id, account_name, user_id, operation_type, direction, amount, fee_amount, currency)
     SELECT x.id, h.account_name, h.user_id, x.operation_type, h.direction, h.amount, h.fee_amount, x.currency
       FROM items x, jsonb_to_recordset(x.history) AS h (account_name text, user_id bigint, direction text, amount bigint, fee_amount bigint)
     ON CONFLICT (intent_id, account_name, direction) WHERE refund_id IS NULL DO NOTHING`,
    [JSON.stringify(items)],
  );
  const dropped = closing.filter((c) => c.action === 'drop').map((c) => c.intent.id);
  if (dropped.length > 0) tx.send(plannedEachCall('DELETE FROM intents WHERE id = ANY($1::uuid[])'), [dropped]);
  for (const failed of closing.filter((c) => c.action === 'fail')) {
    tx.send("UPDATE intents SET status = 'FAILED', failure_reason = $2, updated_at = now() WHERE id = $1", [
      failed.intent.id,
      failed.failureReason,
    ]);
  }
}

/** An invoice's fees as its confirm computed them: stored with the redemption. */
export interface InvoiceFees {
  readonly preFee: bigint;
  readonly postFee: bigint;
  readonly splits: ReadonlyArray<{ readonly account: string; readonly amount: string }>;
}

/** Where one claimed invoice ended: what its confirm decided, to be written with its trail. */
export interface InvoiceRedemption {
  readonly invoice: Pick<Intent, 'id' | 'operationType' | 'currency'>;
  readonly status: 'SETTLED' | 'FAILED';
  readonly failureReason: string | null;
  /** What the ledger holds for the invoice; a FAILED ending with some was reserved, then voided. */
  readonly transferIds: readonly string[];
  readonly payer: { readonly accountName: string; readonly userId: number };
  readonly confirmIdempotencyKey: string;
  readonly attemptId: string;
  readonly fees: InvoiceFees;
  readonly transitions: readonly Transition[];
  readonly history: readonly HistoryRow[];
}

/**
 * Where every claimed invoice ended, in one statement: the invoice row (its payer, fees,
 * transfers and version, as the claim and the ending of a single confirm would have written
 * them), its audit events in order, and the history rows of the settled ones. Answers the
 * invoices as stored, by id. The caller's claim holds each row locked in CREATED.
 */
export async function redeemInvoices(tx: Sql, redemptions: readonly InvoiceRedemption[]): Promise<Map<string, Intent>> {
  if (redemptions.length === 0) return new Map();
  for (const { status, transitions } of redemptions) assertTrail('CREATED', status, transitions);
  const items = redemptions.map((r, ord) => ({
    ord,
    invoice_id: r.invoice.id,
    final_status: r.status,
    final_reason: r.failureReason,
    payer_account: r.payer.accountName,
    payer_user_id: r.payer.userId,
    confirm_key: r.confirmIdempotencyKey,
    attempt_id: r.attemptId,
    pre_fee: r.fees.preFee.toString(),
    post_fee: r.fees.postFee.toString(),
    splits: r.fees.splits.map((split) => ({ account: split.account, amount: split.amount })),
    transfers: r.transferIds,
    reserved: r.transferIds.length > 0,
    operation_type: r.invoice.operationType,
    currency: r.invoice.currency,
    transitions: r.transitions.map(transitionJson),
    history: r.history.map(historyJson),
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
  if (finished.size !== redemptions.length) throw new Error(`finished ${finished.size} of ${redemptions.length} claimed invoices`);
  return finished;
}

const transitionJson = (t: Transition) => ({ from: t.from, to: t.to, reason: t.reason ?? null, payload: t.payload ?? null });

const historyJson = (h: HistoryRow) => ({
  account_name: h.accountName,
  user_id: h.userId,
  direction: h.direction,
  amount: h.amount.toString(),
  fee_amount: h.feeAmount.toString(),
});
