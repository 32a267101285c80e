import assert from 'node:assert/strict';
import { plannedEachCall, type Sql } from '../../../adapters/database.js';
import type { IntentStatus } from '../../model.js';
import { INTENT_SELECT, type Intent, toIntent, type Transition } from './intent-store.js';
import type { OutboxKind, OutboxPayload } from './outbox-jobs.js';
import { assertTrail, isAllowedPspTransition, PSP_ACTIVE_SUB_STATES, PSP_TRANSITIONS, type PspSubState } from './state-machine.js';

/**
 * The one writer of a stored intent's state: every change of its status or PSP sub-state after
 * creation goes through `moveIntent` / `moveIntents`, which check the move against the transition
 * tables (state-machine.ts), write the guarded update (the status, and the sub-state and lease
 * when given, are the guard: docs/rules.md R26), the audit events and any outbox job, in the caller's
 * transaction. The group commits' set-based statements (new intents closed, invoices redeemed)
 * are its sibling intent-batch-writer.ts, their trails checked against the same tables; the PSP
 * worker's leases live here too. No other file updates intents (test/integration/intent-writer.test.ts).
 */

/** What a move may write besides status and sub-state, each a named change: no caller writes an arbitrary column. */
export interface IntentChanges {
  readonly failureReason?: string;
  /** Transfers the move made: added to the intent's list. */
  readonly addTransferIds?: readonly string[];
  /** The same for a move of many intents whose transfers differ: each intent's own, by its id. */
  readonly addTransferIdsByIntent?: ReadonlyMap<string, readonly string[]>;
  readonly cancelReason?: string;
  /** A payout's last provider facts. */
  readonly psp?: {
    readonly inquiryRef?: string | undefined;
    readonly settlementDate?: string | undefined;
    readonly inquiries?: number | undefined;
  };
  /** A payout ended by an operator: its sub-state ends FAILED too (when it has one). */
  readonly endSubState?: boolean;
}

/** Conditions besides the status that must hold for the move; otherwise it does not happen. */
export interface IntentConditions {
  /** An invoice whose time ran out. */
  readonly expiredInvoice?: boolean;
}

/** A move of the PSP sub-state by the worker that holds the intent's lease; the lease is renewed. */
export interface SubStateMove {
  readonly from: PspSubState;
  readonly to: PspSubState;
  readonly leaseOwner: string;
  readonly leaseMs: number;
}

export interface Move {
  /** The status the intent must be in: the guard. */
  readonly from: IntentStatus;
  readonly to: IntentStatus;
  /**
   * The audit trail from `from` to `to`, one event per step, when the move passes through
   * statuses (VALIDATED → AUTHORIZED → SETTLED). Absent: one event from → to.
   */
  readonly trail?: readonly Transition[];
  /** reason and payload of the single event, when there is no trail. */
  readonly reason?: string | null;
  readonly payload?: Readonly<Record<string, unknown>> | null;
  readonly subState?: SubStateMove;
  readonly changes?: IntentChanges;
  readonly conditions?: IntentConditions;
  readonly job?: { readonly kind: OutboxKind; readonly payload: OutboxPayload };
}

/** Moves one intent; null when it is not in `from` (or a condition or the lease does not hold): nothing is written then. */
export async function moveIntent(tx: Sql, intentId: string, move: Move): Promise<Intent | null> {
  const [moved] = await moveIntents(tx, [intentId], move);
  return moved ?? null;
}

/**
 * The same move for many intents at once (a sweep); answers those that moved. One statement: the
 * guarded update, the audit events of the rows it moved and their outbox job, so a move costs
 * one round trip whatever it writes.
 */
export async function moveIntents(tx: Sql, intentIds: readonly string[], move: Move): Promise<Intent[]> {
  const events = eventsOf(move);
  if (intentIds.length === 0) return [];
  const update = updateOf(move);
  const params: unknown[] = [intentIds, ...update.params];
  const p = (value: unknown) => `$${params.push(value)}`;
  const eventsSql = `INSERT INTO intent_events (intent_id, status_from, status_to, reason, payload)
     SELECT m.id, e.status_from, e.status_to, e.reason, e.payload
       FROM moved m,
            unnest(${p(events.map((t) => t.from))}::text[], ${p(events.map((t) => t.to))}::text[], ${p(events.map((t) => t.reason ?? null))}::text[],
                   ${p(events.map((t) => (t.payload === undefined || t.payload === null ? null : JSON.stringify(t.payload))))}::jsonb[])
              WITH ORDINALITY AS e (status_from, status_to, reason, payload, ord)
      ORDER BY array_position($1::uuid[], m.id), e.ord`;
  // An open job of the same kind is already queued: ON CONFLICT keeps the one job per kind.
  const jobSql =
    move.job === undefined
      ? ''
      : `, job AS (
          INSERT INTO outbox (kind, intent_id, payload) SELECT ${p(move.job.kind)}, m.id, ${p(JSON.stringify(move.job.payload))}::jsonb FROM moved m
          ON CONFLICT (intent_id, kind) WHERE done_at IS NULL DO NOTHING)`;
  const { rows } = await tx.query(
    plannedEachCall(`WITH moved AS (
       UPDATE intents SET ${update.sets.join(', ')} WHERE id = ANY($1::uuid[]) AND ${update.guards.join(' AND ')} RETURNING ${INTENT_SELECT}
     ), events AS (${eventsSql})${jobSql}
     SELECT * FROM moved`),
    params,
  );
  return rows.map(toIntent);
}

/** The events a move writes, after checking every step against the transition tables. */
function eventsOf(move: Move): Transition[] {
  const { subState } = move;
  if (subState !== undefined) {
    assert.ok(
      isAllowedPspTransition(subState.from, subState.to),
      `PSP sub-state ${subState.from} → ${subState.to} is not in the transition table`,
    );
    const intentTo = PSP_TRANSITIONS.find((t) => t.from === subState.from && t.to === subState.to)?.intentTo ?? move.from;
    assert.equal(move.to, intentTo, `PSP sub-state ${subState.from} → ${subState.to} moves the intent to ${intentTo}, not ${move.to}`);
    assert.ok(move.trail === undefined, 'a sub-state move has its own event');
    return [{ from: subState.from, to: subState.to, reason: move.reason ?? null, payload: move.payload ?? null }];
  }
  const trail = move.trail ?? [{ from: move.from, to: move.to, reason: move.reason ?? null, payload: move.payload ?? null }];
  assertTrail(move.from, move.to, trail);
  return [...trail];
}

function updateOf(move: Move): { sets: string[]; guards: string[]; params: unknown[] } {
  const params: unknown[] = [];
  // $1 is the id list.
  const p = (value: unknown) => `$${params.push(value) + 1}`;
  const sets = [`status = ${p(move.to)}`, 'updated_at = now()'];
  const guards = [`status = ${p(move.from)}`];
  const { subState, changes = {}, conditions = {} } = move;
  if (subState !== undefined) {
    sets.push(`psp_state = ${p(subState.to)}`, `psp_lease_until = now() + ${p(subState.leaseMs)}::bigint * interval '1 millisecond'`);
    guards.push(`psp_state = ${p(subState.from)}`, `psp_lease_owner = ${p(subState.leaseOwner)}::uuid`);
  }
  if (changes.failureReason !== undefined) sets.push(`failure_reason = ${p(changes.failureReason)}`);
  if (changes.addTransferIds !== undefined && changes.addTransferIds.length > 0)
    sets.push(`transfer_ids = transfer_ids || ${p(changes.addTransferIds)}::uuid[]`);
  if (changes.addTransferIdsByIntent !== undefined && changes.addTransferIdsByIntent.size > 0) {
    const byIntent = JSON.stringify(Object.fromEntries(changes.addTransferIdsByIntent));
    sets.push(
      `transfer_ids = transfer_ids || ARRAY(SELECT t::uuid FROM jsonb_array_elements_text(${p(byIntent)}::jsonb -> id::text) AS t)`,
    );
  }
  if (changes.cancelReason !== undefined) sets.push(`cancel_reason = ${p(changes.cancelReason)}`, 'canceled_at = now()');
  if (changes.psp?.inquiryRef !== undefined) sets.push(`psp_inquiry_ref = ${p(changes.psp.inquiryRef)}`);
  if (changes.psp?.settlementDate !== undefined) sets.push(`settlement_date = ${p(changes.psp.settlementDate)}`);
  if (changes.psp?.inquiries !== undefined) sets.push(`psp_inquiries = ${p(changes.psp.inquiries)}`);
  if (changes.endSubState === true) sets.push("psp_state = CASE WHEN psp_state IS NULL THEN NULL ELSE 'FAILED' END");
  if (conditions.expiredInvoice === true) guards.push("operation_type = 'INVOICE_PAYMENT'", 'expires_at < now()');
  return { sets, guards, params };
}

// The PSP worker's leases ---------------------------------------------------------------------

export interface PspClaimRow {
  readonly id: string;
  readonly psp_state: PspSubState;
  readonly amount: bigint;
  readonly pre_fee_amount: bigint;
  readonly post_fee_amount: bigint;
  readonly currency: string;
  readonly metadata: Record<string, unknown>;
  readonly psp_inquiries: number;
  readonly psp_inquiry_ref: string | null;
  readonly confirm_window_open: boolean;
}

/**
 * Claims up to `limit` payouts that are due, in one statement (FOR UPDATE SKIP LOCKED, then the
 * lease written on the rows): concurrent workers never claim one intent at once, and the row
 * locks last only for this statement. `confirmWindowS`: a confirm may still be sent while the
 * reservation is younger than this.
 */
export async function claimPayouts(
  sql: Sql,
  claim: { readonly owner: string; readonly limit: number; readonly leaseMs: number; readonly confirmWindowS: number },
): Promise<PspClaimRow[]> {
  const { rows } = await sql.query<PspClaimRow>(
    `WITH due AS (
       SELECT id FROM intents
        WHERE status = 'AUTHORIZED' AND channel = 'PSPX_TRANSFER' AND psp_state = ANY($5::text[])
          AND psp_next_at <= now() AND (psp_lease_until IS NULL OR psp_lease_until < now())
        ORDER BY psp_next_at, created_at
        LIMIT $1
          FOR UPDATE SKIP LOCKED)
     UPDATE intents i SET psp_lease_owner = $2::uuid, psp_lease_until = now() + $3::bigint * interval '1 millisecond'
       FROM due WHERE i.id = due.id
     RETURNING i.id, i.psp_state, i.amount, i.pre_fee_amount, i.post_fee_amount, i.currency, i.metadata, i.psp_inquiries, i.psp_inquiry_ref,
               coalesce(i.reserved_at, i.created_at) + $4::bigint * interval '1 second' > now() AS confirm_window_open`,
    [claim.limit, claim.owner, claim.leaseMs, claim.confirmWindowS, PSP_ACTIVE_SUB_STATES],
  );
  return rows;
}

/**
 * The heartbeat of a live PSP worker: extends the leases it still holds (each intent with the
 * token it claimed it with) by `leaseMs`; a lease another worker took meanwhile is left alone.
 * Returns how many were extended.
 */
export async function renewPayoutLeases(
  sql: Sql,
  leases: { readonly ids: readonly string[]; readonly owners: readonly string[] },
  leaseMs: number,
): Promise<number> {
  const { rowCount } = await sql.query(
    `UPDATE intents i SET psp_lease_until = now() + $3::bigint * interval '1 millisecond'
       FROM unnest($1::uuid[], $2::uuid[]) AS held(id, owner)
      WHERE i.id = held.id AND i.psp_lease_owner = held.owner`,
    [leases.ids, leases.owners, leaseMs],
  );
  return rowCount;
}

/** Gives a claimed payout back, due again after `delayMs`; nothing when another worker holds it now. */
export async function releasePayout(sql: Sql, intentId: string, leaseOwner: string, delayMs: number): Promise<void> {
  await sql.query(
    `UPDATE intents SET psp_lease_owner = NULL, psp_lease_until = NULL, psp_next_at = now() + $3::bigint * interval '1 millisecond'
      WHERE id = $1 AND psp_lease_owner = $2::uuid`,
    [intentId, leaseOwner, delayMs],
  );
}

/**
 * Counts a status inquiry that brought no final answer and renews the lease; false when the
 * intent changed meanwhile (the lease ran out and another worker took it).
 */
export async function countInquiry(
  sql: Sql,
  intentId: string,
  lease: { readonly owner: string; readonly ms: number },
  inquiries: { readonly from: number; readonly to: number },
): Promise<boolean> {
  const { rowCount } = await sql.query(
    `UPDATE intents SET psp_inquiries = $4, psp_lease_until = now() + $5::bigint * interval '1 millisecond', updated_at = now()
      WHERE id = $1 AND status = 'AUTHORIZED' AND psp_state = 'INQUIRING' AND psp_lease_owner = $2::uuid AND psp_inquiries = $3`,
    [intentId, lease.owner, inquiries.from, inquiries.to, lease.ms],
  );
  return rowCount === 1;
}
